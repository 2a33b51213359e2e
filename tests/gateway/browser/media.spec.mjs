// Pictures in the web page, in headless Chromium: an image pasted, dropped and picked goes up
// to the gateway and out with the message, shows in the bubble and again in the history after
// a reload; a file that is not an image it claims to be is refused with one line.
//
// Run by tests/gateway/test_browser_media.py (GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH).

import { check, inChromium, logIn, step } from "./harness.mjs";

// A PNG drawn in the page itself: `color` fills a `width` x `height` canvas.
async function makeImage(page, name, color, width, height) {
  await page.evaluate(
    async ({ name, color, width, height }) => {
      const canvas = document.createElement("canvas");
      canvas.width = width;
      canvas.height = height;
      const context = canvas.getContext("2d");
      context.fillStyle = color;
      context.fillRect(0, 0, width, height);
      const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
      window.testFiles = window.testFiles || {};
      window.testFiles[name] = new File([blob], name, { type: "image/png" });
    },
    { name, color, width, height },
  );
}

async function sendAndWait(page, text) {
  await page.locator('.chip[data-state="ready"]').first().waitFor();
  await page.fill("#input", text);
  await page.press("#input", "Enter");
  const bubble = page.locator(".msg.user", { hasText: text });
  await bubble.locator("img.msg-image").first().waitFor();
  await page.locator(".msg.assistant", { hasText: `saw 1 image: ${text}` }).waitFor();
  await page.locator("#run-state[data-state=idle]").waitFor({ state: "attached" });
  check((await page.locator(".chip").count()) === 0, "the chip left with the message");
}

await inChromium(async ({ page, pageErrors }) => {
  await step("log in", async () => {
    await logIn(page);
  });

  await step("a pasted image goes with the message", async () => {
    await makeImage(page, "red.png", "#d00000", 320, 200);
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(window.testFiles["red.png"]);
      const input = document.getElementById("input");
      input.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await sendAndWait(page, "pasted picture");
  });

  await step("a dropped image goes with the message", async () => {
    await makeImage(page, "green.png", "#00a000", 200, 320);
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(window.testFiles["green.png"]);
      const zone = document.getElementById("composer");
      zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
    });
    await sendAndWait(page, "dropped picture");
  });

  await step("a picked image goes with the message", async () => {
    await page.setInputFiles("#file-picker", {
      name: "blue.png",
      mimeType: "image/png",
      buffer: Buffer.from(process.env.BLUE_PNG, "base64"),
    });
    await sendAndWait(page, "picked picture");
  });

  await step("a broken image is refused with one line and no chip", async () => {
    await page.setInputFiles("#file-picker", {
      name: "broken.png",
      mimeType: "image/png",
      buffer: Buffer.from("\x89PNG\r\n\x1a\n this is not really a png"),
    });
    await page.locator(".notice.error", { hasText: "broken.png" }).waitFor();
    check((await page.locator(".chip").count()) === 0, "no chip for the refused file");
  });

  await step("after a reload the history shows the three pictures", async () => {
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    const images = page.locator(".msg.user img.msg-image");
    await images.nth(2).waitFor();
    check((await images.count()) === 3, `three pictures in the history (got ${await images.count()})`);
    await page.waitForFunction(() =>
      [...document.querySelectorAll(".msg.user img.msg-image")].every((img) => img.complete && img.naturalWidth > 0),
    );
    const widths = await images.evaluateAll((nodes) => nodes.map((img) => img.naturalWidth));
    check(JSON.stringify(widths) === "[320,200,64]", `the saved files came back (got ${widths})`);
    check(pageErrors.length === 0, `no page errors (${pageErrors.join("; ")})`);
  });

  await step("a recording from the microphone goes as a voice note and is transcribed", async () => {
    await page.click("#record");
    await page.locator("#record.recording").waitFor();
    await page.waitForTimeout(800); // the length of the recording, not a wait for an event
    await page.click("#record");
    await page.locator(".msg.user .msg-file", { hasText: "voice note" }).waitFor();
    await page.locator(".msg.assistant", { hasText: "saw 0 image: [voice note inbox/" }).waitFor();
  });
}, {
  permissions: ["microphone"],
  args: ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"],
});
