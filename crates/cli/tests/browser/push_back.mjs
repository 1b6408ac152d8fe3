// A person pushes a gate back from the page with a comment: the run,
// waiting in another process, runs the gate's stage again, the page offers
// the gate anew, and the person approves the new outputs.
// Needs BATON_URL, BATON_RUN, BATON_TOKEN (see lib.mjs).
import { env, fail, login, shot, waitForText, withPage } from "./lib.mjs";

const run = env("BATON_RUN");

await withPage(async (page, base) => {
  await login(page, base);
  await page.goto(`${base}/runs/${run}`);
  await page.fill('form.gate input[name="comment"]', "cover the error path too");
  await Promise.all([
    page.waitForURL(`${base}/runs/${run}`),
    page.click('form.gate button[value="push-back"]'),
  ]);
  // The stage runs again; the page draws itself anew as the gate stops
  // and starts waiting, and offers the decision on the new outputs.
  await page.locator("form.gate").waitFor({ timeout: 60_000 });
  await page.fill('form.gate input[name="comment"]', "better");
  await Promise.all([
    page.waitForURL(`${base}/runs/${run}`),
    page.click('form.gate button[value="approve"]'),
  ]);
  await waitForText(page, "[data-run-status]", "success", 60_000);
  const formsLeft = await page.locator("form.gate").count();
  await page.goto(`${base}/runs/${run}/stages/review`);
  await shot(page, "stage");
  return { formsLeft };
}).catch(fail);
