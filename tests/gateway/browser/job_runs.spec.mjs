// Sessions of isolated cron-job runs are grouped under their job in the sidebar, in headless
// Chromium (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser_job_runs.py, which ran job "digest" three times (isolated
// sessions) and had one conversation ("work") before starting the gateway; it passes
// GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH and JOB_ID. Exits non-zero on the first failed step.

import { check, inChromium, logIn, step } from "./harness.mjs";

const jobId = process.env.JOB_ID;

await inChromium(async ({ page, pageErrors }) => {
  await step("runs are one collapsed row under their job, below the conversations", async () => {
    await logIn(page);
    const group = page.locator(`#sessions > li.job-group details[data-job="${jobId}"]`);
    await group.waitFor();
    const summary = await group.locator("summary").textContent();
    check(summary.includes("digest") && summary.includes("3 runs"), `names the job and its runs (got ${summary})`);
    check(!(await group.evaluate((node) => node.open)), "collapsed");
    const top = await page.locator("#sessions > li > button.session .name").allTextContents();
    check(top.includes("work"), `the conversation is listed (got ${top.join(", ")})`);
    check(!top.some((name) => name.startsWith("cron:")), `no run at the top level (got ${top.join(", ")})`);
    const last = await page.locator("#sessions > li").last().getAttribute("class");
    check(last === "job-group", "the job's row comes after the conversations");
  });

  await step("opening the group lists each run, and a run opens its transcript", async () => {
    const group = page.locator(`details[data-job="${jobId}"]`);
    await group.locator("summary").click();
    const runs = group.locator("button.session");
    await runs.first().waitFor();
    check((await runs.count()) === 3, `three runs (got ${await runs.count()})`);
    await runs.first().click();
    await page.locator(".msg.user", { hasText: "summarise the day" }).first().waitFor();
    const title = await page.locator("#session-title").textContent();
    check(title.startsWith("run "), `the title names the run (got ${title})`);
  });

  await step("after a reload the open run keeps its group open", async () => {
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    const group = page.locator(`details[data-job="${jobId}"]`);
    await group.waitFor();
    check(await group.evaluate((node) => node.open), "the group holding the open session is open");
    check(pageErrors.length === 0, `no page errors (got ${pageErrors.join("; ")})`);
  });
});
