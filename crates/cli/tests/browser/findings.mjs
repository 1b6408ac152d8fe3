// A stage's page after a correction cycle: its findings, cycle by cycle,
// the most severe first. Needs BATON_URL, BATON_RUN, BATON_STAGE (see
// lib.mjs).
import { env, fail, shot, withPage } from "./lib.mjs";

const run = env("BATON_RUN");
const stage = env("BATON_STAGE");

await withPage(async (page, base) => {
  await page.goto(`${base}/runs/${run}/stages/${stage}`);
  const rows = await page.locator("tr.finding").evaluateAll((rows) =>
    rows.map((row) => {
      const cells = [...row.querySelectorAll("td")].map((cell) => cell.textContent.trim());
      return { cycle: cells[0], severity: cells[1], status: cells[2] };
    }),
  );
  await page.locator("h2", { hasText: "Findings" }).scrollIntoViewIfNeeded();
  await shot(page, "findings");
  return { rows };
}).catch(fail);
