// Live updates of a run's page: the run's status object arrives as a
// server-sent event each time it changes, and the states shown follow it.
// Text is set with textContent only: nothing received becomes markup.
"use strict";

(function () {
  const root = document.getElementById("run");
  if (!root || !window.EventSource) {
    return;
  }
  const run = root.dataset.run;
  const waiting = (status) =>
    status.gates.filter((gate) => gate.status === "awaiting" || gate.status === "stale").map((gate) => gate.stage).join("\n");
  // As the page was drawn: an event that says otherwise draws it anew.
  let gates = root.dataset.waiting ?? null;

  function setStatus(element, status) {
    const span = document.createElement("span");
    span.className = "status status-" + status;
    span.textContent = status;
    element.replaceChildren(span);
  }

  function duration(ms) {
    if (ms === null || ms === undefined) {
      return "-";
    }
    const seconds = Math.floor(ms / 1000);
    if (seconds < 60) {
      return seconds + "." + Math.floor((ms % 1000) / 100) + " s";
    }
    if (seconds < 3600) {
      return Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
    }
    return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min";
  }

  // A stage's page follows its log while the stage runs.
  const log = document.getElementById("stage-log");
  let following = null;
  function follow(running) {
    if (running && following === null) {
      following = window.setInterval(readLog, 1000);
    } else if (!running && following !== null) {
      window.clearInterval(following);
      following = null;
      readLog();
    }
  }
  function readLog() {
    fetch(log.dataset.log)
      .then((response) => (response.ok ? response.text() : null))
      .then((text) => {
        if (text !== null) {
          log.textContent = text.slice(-65536);
        }
      })
      .catch(() => {});
  }

  const source = new EventSource("/api/runs/" + encodeURIComponent(run) + "/events");
  source.addEventListener("status", (event) => {
    const status = JSON.parse(event.data);
    // A gate that starts or stops waiting changes the forms: draw the page anew.
    const now = waiting(status) + "|" + status.status;
    if (gates !== null && gates !== now) {
      source.close();
      window.location.reload();
      return;
    }
    gates = now;
    const runStatus = root.querySelector("[data-run-status]");
    if (runStatus) {
      setStatus(runStatus, status.status);
    }
    if (log) {
      const mine = status.stages.find((stage) => stage.stage === log.dataset.stage);
      follow(mine !== undefined && mine.status === "running");
    }
    for (const stage of status.stages) {
      for (const cell of root.querySelectorAll("[data-stage-status]")) {
        if (cell.dataset.stageStatus === stage.stage) {
          setStatus(cell, stage.status);
        }
      }
      for (const cell of root.querySelectorAll("[data-stage-duration]")) {
        if (cell.dataset.stageDuration === stage.stage) {
          cell.textContent = duration(stage.duration_ms);
        }
      }
      for (const node of root.querySelectorAll("svg.dag g[data-stage]")) {
        if (node.dataset.stage === stage.stage) {
          node.setAttribute("class", "node node-" + stage.status);
        }
      }
    }
  });
})();
