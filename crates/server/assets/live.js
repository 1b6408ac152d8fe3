// Live updates of a run's page: the run's status object arrives as a
// server-sent event, then what changed in it each time it changes, and
// the states shown follow it.
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

  // The cells and boxes of each stage, found once, with the state and
  // duration they show: an event then touches only the stages whose state
  // it changes (the first one included, though it names every stage).
  const shown = new Map();
  function shownOf(name) {
    let entry = shown.get(name);
    if (entry === undefined) {
      entry = { status: [], duration: [], node: [], state: null, text: null };
      shown.set(name, entry);
    }
    return entry;
  }
  for (const cell of root.querySelectorAll("[data-stage-status]")) {
    const entry = shownOf(cell.dataset.stageStatus);
    entry.status.push(cell);
    entry.state = cell.textContent.trim();
  }
  for (const cell of root.querySelectorAll("[data-stage-duration]")) {
    const entry = shownOf(cell.dataset.stageDuration);
    entry.duration.push(cell);
    entry.text = cell.textContent;
  }
  for (const node of root.querySelectorAll("svg.dag g[data-stage]")) {
    shownOf(node.dataset.stage).node.push(node);
  }

  function showStage(stage) {
    const entry = shown.get(stage.stage);
    if (entry === undefined) {
      return;
    }
    const text = duration(stage.duration_ms);
    if (entry.state === stage.status && entry.text === text) {
      return;
    }
    entry.state = stage.status;
    entry.text = text;
    for (const cell of entry.status) {
      setStatus(cell, stage.status);
    }
    for (const cell of entry.duration) {
      cell.textContent = text;
    }
    for (const node of entry.node) {
      node.setAttribute("class", "node node-" + stage.status);
    }
  }

  // How many stages stand in each state, in the order the page names them.
  const counts = root.querySelector("[data-run-counts]");
  function showCounts() {
    const order = counts.dataset.runCounts.split(" ");
    const counted = new Map();
    for (const stage of status.stages) {
      counted.set(stage.status, (counted.get(stage.status) ?? 0) + 1);
    }
    const rank = (name) => (order.indexOf(name) === -1 ? order.length : order.indexOf(name));
    const parts = [...counted.entries()]
      .sort((a, b) => rank(a[0]) - rank(b[0]))
      .map(([name, count]) => count + " " + name);
    const total = status.stages.length;
    const text = total + (total === 1 ? " stage: " : " stages: ") + parts.join(", ");
    if (counts.textContent !== text) {
      counts.textContent = text;
    }
  }

  // The whole status object as the events built it: a `status` event
  // replaces it, a `delta` event carries the run's fields and the stages
  // that changed.
  let status = null;
  function show(changed) {
    // A gate that starts or stops waiting changes the forms: draw the page
    // anew. Anything else, the run's end included, is shown in place.
    const now = waiting(status) + "|" + (status.status === "awaiting_human");
    if (gates !== null && gates !== now) {
      source.close();
      window.location.reload();
      return;
    }
    gates = now;
    const runStatus = root.querySelector("[data-run-status]");
    if (runStatus && runStatus.textContent !== status.status) {
      setStatus(runStatus, status.status);
    }
    const finished = root.querySelector("[data-run-finished]");
    if (finished && finished.textContent !== (status.finished_at ?? "-")) {
      finished.textContent = status.finished_at ?? "-";
    }
    const error = root.querySelector("[data-run-error]");
    if (error && error.textContent !== (status.error ?? "")) {
      error.textContent = status.error ?? "";
      error.hidden = !status.error;
    }
    if (log) {
      const mine = status.stages.find((stage) => stage.stage === log.dataset.stage);
      follow(mine !== undefined && mine.status === "running");
    }
    if (counts) {
      showCounts();
    }
    for (const stage of changed) {
      showStage(stage);
    }
  }

  // Where each stage is in `status.stages`: a delta comes only while the
  // list of stages stays the same.
  let at = new Map();
  const source = new EventSource("/api/runs/" + encodeURIComponent(run) + "/events");
  source.addEventListener("status", (event) => {
    status = JSON.parse(event.data);
    at = new Map(status.stages.map((stage, index) => [stage.stage, index]));
    show(status.stages);
  });
  source.addEventListener("delta", (event) => {
    if (status === null) {
      return;
    }
    const delta = JSON.parse(event.data);
    const changed = delta.stages;
    delta.stages = status.stages;
    for (const stage of changed) {
      const index = at.get(stage.stage);
      if (index !== undefined) {
        delta.stages[index] = stage;
      }
    }
    status = delta;
    show(changed);
  });
})();
