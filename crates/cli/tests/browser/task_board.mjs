// The task board: a follow-up's card links to the task whose verdict made
// it, and following the link opens that task's page, which lists the
// follow-up. Markup in a task's description stays text.
// Needs BATON_URL, BATON_FOLLOW_UP (see lib.mjs).
import { env, fail, shot, withPage } from "./lib.mjs";

const followUp = env("BATON_FOLLOW_UP");

await withPage(async (page, base) => {
  await page.goto(`${base}/tasks`);
  const columns = await page.locator("section.column").evaluateAll((sections) =>
    sections.map((section) => section.dataset.phase),
  );
  const card = page.locator(`article.card[data-task="${followUp}"]`);
  const column = await card.evaluate((element) => element.closest("section.column").dataset.phase);
  const origin = card.locator("a.origin");
  const originHref = await origin.getAttribute("href");
  const originText = (await origin.innerText()).trim();
  const pwnedOnBoard = await page.evaluate(() => window.__pwned !== undefined);
  await shot(page, "task-board");
  await Promise.all([page.waitForURL(`${base}${originHref}`), origin.click()]);
  return {
    columns,
    column,
    originHref,
    originText,
    pwnedOnBoard,
    heading: (await page.locator("h1").innerText()).trim(),
    phase: (await page.locator('[data-status="phase"]').innerText()).trim(),
    followUps: await page
      .locator("ul.follow-ups a.follow-up")
      .evaluateAll((links) => links.map((link) => link.textContent.trim())),
  };
}).catch(fail);
