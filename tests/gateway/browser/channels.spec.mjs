// Drives the web page's Channels section in headless Chromium (Debian's, through
// playwright-core): the channel's state shows, a pending pairing shows with its code, and
// clicking Approve approves it.
//
// Run by tests/gateway/test_browser_channels.py, which starts a scripted model, a scripted
// Bot API with one unknown sender waiting for approval, and a gateway; it passes GATEWAY_URL,
// GATEWAY_TOKEN, CHROMIUM_PATH and PAIRING_CODE. Exits non-zero on the first failed step.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const url = process.env.GATEWAY_URL;
const token = process.env.GATEWAY_TOKEN;
const code = process.env.PAIRING_CODE;
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

  await step("the page connects with the token", async () => {
    await page.goto(url);
    await page.fill("#token", token);
    await page.click("#login-form button[type=submit]");
    await page.locator("body[data-ready=true]").waitFor();
  });

  await step("the Channels section shows telegram connected as the bot", async () => {
    const row = page.locator('#channels li.channel[data-channel="telegram"][data-state="connected"]');
    await row.waitFor();
    const text = await row.textContent();
    check(text.includes(`@${process.env.BOT_NAME}`), `the bot's name in "${text}"`);
  });

  await step("the pending pairing shows the sender and its code", async () => {
    const row = page.locator(`#channels li.pairing[data-code="${code}"]`);
    await row.waitFor();
    const text = await row.textContent();
    check(text.includes("Pat Doe") && text.includes(code), `sender and code in "${text}"`);
    // SCREENSHOT=<path>: keep a picture of the sidebar for a human to look at.
    if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT });
  });

  await step("Approve approves it and the request leaves the list", async () => {
    await page.click(`#channels li.pairing[data-code="${code}"] button.approve`);
    await page.locator(`#channels li.pairing[data-code="${code}"]`).waitFor({ state: "detached" });
  });

  await step("the page raised no errors", async () => {
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
