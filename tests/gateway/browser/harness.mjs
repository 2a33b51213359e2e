// Shared by the browser specs: a headless Chromium (Debian's, through playwright-core) on a
// fresh profile, named steps, checks, and the login every spec starts with.
//
// The Python test that runs a spec passes GATEWAY_URL, GATEWAY_TOKEN and CHROMIUM_PATH.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const url = process.env.GATEWAY_URL;
export const token = process.env.GATEWAY_TOKEN;
const STEP_TIMEOUT = 30000; // generous: a loaded 2-core machine runs Chromium slowly

export function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

export async function step(name, body) {
  process.stdout.write(`- ${name} … `);
  await body();
  process.stdout.write("ok\n");
}

// Opens the page in a fresh profile (playwright passes it as --user-data-dir), runs
// `body({ page, pageErrors })` and exits: non-zero on the first failed step, naming it.
// `permissions` are granted to the gateway's origin first; `args` are more Chromium switches.
export async function inChromium(body, { permissions = [], args = [] } = {}) {
  const profile = mkdtempSync(join(tmpdir(), "nodmix-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM_PATH,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...args,
    ],
  });
  if (permissions.length > 0) await context.grantPermissions(permissions, { origin: url });
  let failed = false;
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(STEP_TIMEOUT);
    const pageErrors = [];
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    await body({ page, pageErrors });
  } catch (error) {
    failed = true;
    process.stdout.write(`FAILED\n${error.stack || error}\n`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

// Enters the token on the login form and waits until the page is ready.
export async function logIn(page) {
  await page.goto(url);
  await page.fill("#token", token);
  await page.click("#login-form button[type=submit]");
  await page.locator("body[data-ready=true]").waitFor();
}
