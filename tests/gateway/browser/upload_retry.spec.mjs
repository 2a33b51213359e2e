// An image picked while the gateway is already receiving this client's uploads
// (gateway.maxUploadsPerClient): the gateway answers 429 with Retry-After, the page waits and
// sends it again, and the image arrives as a ready chip without an error notice.
//
// Run by tests/gateway/test_browser_media.py (GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH).

import { check, inChromium, logIn, step } from "./harness.mjs";

await inChromium(async ({ page, pageErrors }) => {
  await step("log in", async () => {
    await logIn(page);
  });

  await step("a busy upload is retried until it arrives", async () => {
    await page.setInputFiles("#file-picker", {
      name: "blue.png",
      mimeType: "image/png",
      buffer: Buffer.from(process.env.BLUE_PNG, "base64"),
    });
    await page.locator('.chip[data-state="ready"]').waitFor({ timeout: 20000 });
    check((await page.locator(".notice.error").count()) === 0, "no error notice");
    check(pageErrors.length === 0, `no page errors (${pageErrors.join("; ")})`);
  });
});
