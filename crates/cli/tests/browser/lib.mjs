// What the browser scripts share: Chromium launched through playwright-core
// with a fresh profile, the run's parameters from the environment, and the
// one line a script reports its findings on.
//
// The Rust test (crates/cli/tests/cli/browser.rs) starts `baton serve` and
// the runs, then this script, and asserts on its exit status and on the
// `RESULT {json}` line it prints; a failed wait exits 1 with the reason on
// stderr.
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

// A variable the test must set.
export function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

const require = createRequire(path.join(env("BATON_TEST_PLAYWRIGHT"), "baton-browser-tests.js"));
const { chromium } = require("playwright-core");

// Generous: a busy two-core machine runs the browser, the server and the
// run side by side. A wait that needs this long is still an answer.
const WAIT_MS = 30_000;

// Launches Chromium on a fresh profile (`BATON_PROFILE`, made empty by the
// test), hands `body` a page whose dialogs are counted and dismissed, and
// prints what `body` returns as the `RESULT` line.
export async function withPage(body) {
  // Nothing the script waits for may hang it: the test reads its output.
  setTimeout(() => {
    console.error("the browser script did not finish within 3 minutes");
    process.exit(1);
  }, 180_000).unref();
  const context = await chromium.launchPersistentContext(env("BATON_PROFILE"), {
    executablePath: env("BATON_TEST_CHROMIUM"),
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  try {
    context.setDefaultTimeout(WAIT_MS);
    const page = context.pages()[0] ?? (await context.newPage());
    const dialogs = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      dialog.dismiss().catch(() => {});
    });
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    const result = await body(page, env("BATON_URL"));
    console.log("RESULT " + JSON.stringify({ ...result, dialogs, errors }));
  } finally {
    await context.close();
  }
}

// The next line on stdin: how the test says what happened outside the page.
let lines = null;
export async function nextLine() {
  lines ??= readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const { value, done } = await lines.next();
  if (done) {
    throw new Error("stdin closed before the test said what happened");
  }
  return value.trim();
}

// Waits for the text of the first element `selector` matches to be `text`.
export async function waitForText(page, selector, text, timeout = WAIT_MS) {
  await page.waitForFunction(
    ([selector, text]) => document.querySelector(selector)?.textContent.trim() === text,
    [selector, text],
    { timeout },
  );
}

// Exits 1 with the error's message: the test shows stderr.
export function fail(error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}

// With BATON_SCREENSHOTS naming a directory (as `scripts/screenshots` sets
// it), the page as it is now goes there as NAME.png: the pictures in docs/.
export async function shot(page, name) {
  const dir = process.env.BATON_SCREENSHOTS;
  if (dir) {
    await page.setViewportSize({ width: 1100, height: 760 });
    await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
  }
}

// Logs in with BATON_TOKEN on the login page, landing on the runs list.
export async function login(page, base) {
  await page.goto(`${base}/login`);
  await page.fill('input[name="token"]', env("BATON_TOKEN"));
  await Promise.all([
    page.waitForURL(`${base}/`),
    page.click('form.login button[type="submit"]'),
  ]);
}
