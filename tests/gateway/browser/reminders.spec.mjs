// A reminder asked for on the web page comes back into the open session, in headless Chromium
// (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser_reminders.py, which starts a gateway whose scheduler runs
// on a manual clock and moves that clock once the job exists; it passes GATEWAY_URL,
// GATEWAY_TOKEN and CHROMIUM_PATH. Exits non-zero on the first failed step.

import { check, inChromium, logIn, step } from "./harness.mjs";

await inChromium(async ({ page, pageErrors }) => {
  await step("asking for a reminder gets the model's promise", async () => {
    await logIn(page);
    await page.fill("#input", "remind me to call Anna");
    await page.press("#input", "Enter");
    await page.locator(".msg.assistant", { hasText: "I will remind you." }).waitFor();
  });

  await step("the reminder appears in the open session when the job fires", async () => {
    const posted = page.locator(".msg.assistant.from-job", { hasText: "Reminder: call Anna" });
    await posted.waitFor({ timeout: 20000 });
    const label = await posted.locator(".job-label").textContent();
    check(label.includes('cron job "anna"'), `names the job (got ${label})`);
  });

  await step("after a reload the session's history still shows it as the job's", async () => {
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    const posted = page.locator(".msg.assistant.from-job", { hasText: "Reminder: call Anna" });
    await posted.waitFor();
    check((await posted.count()) === 1, "shown once");
    check(pageErrors.length === 0, `no page errors (got ${pageErrors.join("; ")})`);
  });
});
