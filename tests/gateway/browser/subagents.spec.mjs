// A subagent started from the web page, in headless Chromium (Debian's, through
// playwright-core): its session is listed nested under the session that spawned it, its
// result appears in the open session when it lands (and stays after a reload), and the
// result's link opens the subagent's own session.
//
// Run by tests/gateway/test_browser_subagents.py (the `subagents` scripted model behind a
// real gateway); it passes GATEWAY_URL, GATEWAY_TOKEN and CHROMIUM_PATH.

import { check, inChromium, logIn, step } from "./harness.mjs";

await inChromium(async ({ page, pageErrors }) => {
  await step("a spawn is accepted and the subagent is listed under its parent", async () => {
    await logIn(page);
    await page.fill("#input", "spawn: sleep 1 gather sources");
    await page.press("#input", "Enter");
    await page.locator(".msg.assistant", { hasText: "accepted as sub_" }).waitFor();
    const child = page.locator('#sessions li.child[data-parent="agent:main:main"]');
    await child.waitFor();
    check((await child.locator(".name").textContent()) === "sleep 1 gather sources", "labelled");
    const rows = await page
      .locator("#sessions li")
      .evaluateAll((items) => items.map((li) => `${li.className}|${li.querySelector("button").dataset.key}`));
    const parent = rows.findIndex((row) => row.endsWith("|agent:main:main"));
    check(parent >= 0 && rows[parent + 1]?.startsWith("child|agent:main:subagent:"), `nested (got ${rows})`);
  });

  await step("the result appears in the open session when it lands", async () => {
    const result = page.locator(".msg.assistant.from-subagent", { hasText: "done: gather sources" });
    await result.waitFor({ timeout: 20000 });
    const label = await result.locator(".job-label").textContent();
    check(label.includes('subagent "sleep 1 gather sources" (completed)'), `names it (got ${label})`);
  });

  await step("after a reload the history shows it once", async () => {
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    const result = page.locator(".msg.assistant.from-subagent", { hasText: "done: gather sources" });
    await result.waitFor();
    check((await result.count()) === 1, "shown once");
  });

  await step("its link opens the subagent's own session", async () => {
    await page.click(".from-subagent button.open-subagent");
    await page.locator("#session-title", { hasText: "sleep 1 gather sources" }).waitFor();
    await page.locator(".msg.user", { hasText: "sleep 1 gather sources" }).waitFor();
    await page.locator(".msg.assistant", { hasText: "done: gather sources" }).waitFor();
    check(pageErrors.length === 0, `no page errors (got ${pageErrors.join("; ")})`);
  });
});
