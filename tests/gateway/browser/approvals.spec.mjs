// Drives the web page's approval buttons in headless Chromium (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser_approvals.py, which starts a scripted model that runs
// `run <command>` through exec, and a gateway whose exec policy asks on every unknown command.
// Passes GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH and DENIED_MARKER (a file that must not be
// created). Exits non-zero on the first failed step, naming it.

import { check, inChromium, logIn, step } from "./harness.mjs";

const marker = process.env.DENIED_MARKER;

await inChromium(async ({ page, pageErrors }) => {
  await step("log in", async () => {
    await logIn(page);
  });

  await step("an unknown command shows an approval card naming it", async () => {
    await page.fill("#input", "run echo approved-in-the-browser");
    await page.press("#input", "Enter");
    const card = page.locator(".approval", { hasText: "echo approved-in-the-browser" });
    await card.waitFor();
    const head = await card.locator(".approval-head").textContent();
    check(head.includes("agent main") && head.includes("agent:main:main"), `names agent and session (got ${head})`);
    const reason = await card.locator(".approval-reason").textContent();
    check(reason.includes("not on the exec allowlist"), `says why (got ${reason})`);
  });

  await step("Allow once runs it and the card goes away", async () => {
    await page.click(".approval button[data-decision=allow-once]");
    await page.locator(".approval").waitFor({ state: "detached" });
    await page.locator(".msg.assistant", { hasText: "tool said: approved-in-the-browser" }).waitFor();
    await page.locator("#run-state[data-state=idle]").waitFor({ state: "attached" });
  });

  await step("Deny refuses it and the model is told", async () => {
    await page.fill("#input", `run touch ${marker}`);
    await page.press("#input", "Enter");
    const card = page.locator(".approval", { hasText: `touch ${marker}` });
    await card.waitFor();
    await card.locator("button[data-decision=deny]").click();
    await page.locator(".approval").waitFor({ state: "detached" });
    await page.locator(".msg.assistant", { hasText: "Not run: the user denied this command" }).waitFor();
  });

  await step("a request made before the page loaded is listed after a reload", async () => {
    await page.fill("#input", "run echo after-reload");
    await page.press("#input", "Enter");
    await page.locator(".approval", { hasText: "echo after-reload" }).waitFor();
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    const card = page.locator(".approval", { hasText: "echo after-reload" });
    await card.waitFor();
    await card.locator("button[data-decision=allow-once]").click();
    await page.locator(".approval").waitFor({ state: "detached" });
  });

  await step("no page errors", async () => {
    check(pageErrors.length === 0, `page errors: ${pageErrors.join("; ")}`);
  });
});
