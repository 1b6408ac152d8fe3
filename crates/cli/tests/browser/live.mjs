// A stage's state follows the run without a reload: the page shows the
// stage `wait` running; the test lets it finish and says `FINISHED` on
// stdin once `baton status` shows it finished; the page must show it
// finished too, on the same document, then prints `SHOWN`; once the test
// says `ENDED` (the run succeeded), the page must show the run's end on
// the same document as well. Prints `READY` when the page shows the stage
// running. Needs BATON_URL, BATON_RUN (see lib.mjs).
import { env, fail, nextLine, shot, waitForText, withPage } from "./lib.mjs";

const run = env("BATON_RUN");
const cell = '[data-stage-status="wait"]';

await withPage(async (page, base) => {
  await page.goto(`${base}/runs/${run}`);
  await waitForText(page, cell, "running");
  await shot(page, "run-live");
  // A reload would lose these: the marker, and the moment the cell changed.
  await page.evaluate((cell) => {
    window.__sameDocument = true;
    const element = document.querySelector(cell);
    new MutationObserver(() => {
      if (window.__finishedAt === undefined && element.textContent.trim() === "success") {
        window.__finishedAt = Date.now();
      }
    }).observe(element, { childList: true, subtree: true, characterData: true });
  }, cell);
  console.log("READY");

  const said = await nextLine();
  if (said !== "FINISHED") {
    throw new Error(`expected FINISHED on stdin, got ${JSON.stringify(said)}`);
  }
  const statusShowedAt = Date.now();
  // Within 1 s is what a person sees as live; 5 s leaves room for a busy
  // machine, and the measured latency is reported for a reader to judge.
  await page.waitForFunction(() => window.__finishedAt !== undefined, null, { timeout: 5_000 });
  // `hold` starts after `wait` ends, maybe an event later: the counts
  // are read once they say so, or as they stand after 5 s.
  await page
    .waitForFunction(
      () => document.querySelector("[data-run-counts]").textContent.includes("1 running, 1 success"),
      null,
      { timeout: 5_000 },
    )
    .catch(() => {});
  const running = await page.evaluate(
    ([cell, statusShowedAt]) => ({
      latencyMs: window.__finishedAt - statusShowedAt,
      sameDocument: window.__sameDocument === true,
      cellText: document.querySelector(cell).textContent.trim(),
      nodeClass: document.querySelector('svg.dag g[data-stage="wait"]')?.getAttribute("class"),
      runStatus: document.querySelector("[data-run-status]").textContent.trim(),
      counts: document.querySelector("[data-run-counts]").textContent.trim(),
    }),
    [cell, statusShowedAt],
  );
  console.log("SHOWN");

  // The run's end is shown in place too: its status, when it finished.
  const ended = await nextLine();
  if (ended !== "ENDED") {
    throw new Error(`expected ENDED on stdin, got ${JSON.stringify(ended)}`);
  }
  await waitForText(page, "[data-run-status]", "success");
  const end = await page.evaluate(() => ({
    sameDocument: window.__sameDocument === true,
    finished: document.querySelector("[data-run-finished]").textContent.trim(),
    counts: document.querySelector("[data-run-counts]").textContent.trim(),
  }));
  return { ...running, end };
}).catch(fail);
