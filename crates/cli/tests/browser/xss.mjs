// Text a run recorded (a stage name, a fan-out key, an error, the
// workflow's name) holding markup that would run script stays text on the
// pages: nothing runs, no element is made of it, and it reads as written.
// Needs BATON_URL, BATON_RUN and BATON_PAYLOADS, a JSON array of the texts
// (see lib.mjs).
import { env, fail, withPage } from "./lib.mjs";

const run = env("BATON_RUN");
const payloads = JSON.parse(env("BATON_PAYLOADS"));

// What a page shows of the payloads and whether any of them became markup.
async function inspect(page) {
  return await page.evaluate((payloads) => {
    const text = document.body.innerText;
    return {
      pwned: window.__pwned !== undefined,
      title: document.title,
      // The CSP would stop an inline handler that got through; a violation
      // is how an unescaped one would still show.
      violations: window.__violations,
      injected: document.querySelectorAll("img, iframe, [onerror], [onload], body script").length,
      scripts: [...document.scripts].map((script) => script.getAttribute("src")),
      missing: payloads.filter((payload) => !text.includes(payload)),
    };
  }, payloads);
}

await withPage(async (page, base) => {
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (event) => {
      window.__violations.push(`${event.violatedDirective}: ${event.sample}`);
    });
    // Counts the live updates live.js has applied: this listener is added
    // before the page's own, and counts once the page's has run.
    window.__events = 0;
    const Source = window.EventSource;
    window.EventSource = class extends Source {
      constructor(...args) {
        super(...args);
        this.addEventListener("status", () => setTimeout(() => window.__events++, 0));
      }
    };
  });
  await page.goto(`${base}/runs/${run}`);
  await page.waitForFunction(() => window.__events >= 1);
  const runPage = await inspect(page);
  await page.goto(`${base}/`);
  const runsList = await inspect(page);
  return { runPage, runsList };
}).catch(fail);
