// A person logs in with a token, opens the run from the runs list and
// approves its gate; the run, waiting in another process, goes on.
// Needs BATON_URL, BATON_RUN, BATON_TOKEN (see lib.mjs).
import { env, fail, login, shot, waitForText, withPage } from "./lib.mjs";

const run = env("BATON_RUN");

await withPage(async (page, base) => {
  await login(page, base);
  // The cookie is HttpOnly: no script on the page can read the token.
  const cookieSeenByScripts = await page.evaluate(() => document.cookie);

  await Promise.all([page.waitForURL(`${base}/runs/${run}`), page.click(`a[href="/runs/${run}"]`)]);
  const form = page.locator("form.gate");
  const formText = (await form.innerText()).trim();
  await shot(page, "run-gate");
  await page.fill('form.gate input[name="comment"]', "approved from the page");
  await Promise.all([
    page.waitForURL(`${base}/runs/${run}`),
    page.click('form.gate button[value="approve"]'),
  ]);
  // The run goes on in its own process; the page follows it live.
  await waitForText(page, "[data-run-status]", "success", 60_000);
  return {
    cookieSeenByScripts,
    formText,
    formsLeft: await page.locator("form.gate").count(),
  };
}).catch(fail);
