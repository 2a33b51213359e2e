// Drives the web page's Channels section in headless Chromium (Debian's, through
// playwright-core): the channel's state shows, a pending pairing shows with its code, and
// clicking Approve approves it.
//
// Run by tests/gateway/test_browser_channels.py, which starts a scripted model, a scripted
// Bot API with one unknown sender waiting for approval, and a gateway; it passes GATEWAY_URL,
// GATEWAY_TOKEN, CHROMIUM_PATH and PAIRING_CODE. Exits non-zero on the first failed step.

import { check, inChromium, logIn, step, token } from "./harness.mjs";

const code = process.env.PAIRING_CODE;

await inChromium(async ({ page, pageErrors }) => {
  await step("the page connects with the token", async () => {
    await logIn(page);
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
});
