// Drives the web page's approval buttons in headless Chromium (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser_approvals.py, which starts a scripted model that runs
// `run <command>` through exec, and a gateway whose exec policy asks on every unknown command.
// Passes GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH and DENIED_MARKER (a file that must not be
// created). Exits non-zero on the first failed step, naming it.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const url = process.env.GATEWAY_URL;
const token = process.env.GATEWAY_TOKEN;
const marker = process.env.DENIED_MARKER;
const STEP_TIMEOUT = 30000; // generous: a loaded 2-core machine runs Chromium slowly

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function step(name, body) {
  process.stdout.write(`- ${name} … `);
  await body();
  process.stdout.write("ok\n");
}

const profile = mkdtempSync(join(tmpdir(), "nodmix-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM_PATH,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
let failed = false;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP_TIMEOUT);
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));

  await step("log in", async () => {
    await page.goto(url);
    await page.fill("#token", token);
    await page.click("#login-form button[type=submit]");
    await page.locator("body[data-ready=true]").waitFor();
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
} catch (error) {
  failed = true;
  process.stdout.write(`FAILED\n${error.stack || error}\n`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
