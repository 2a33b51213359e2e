// Drives the gateway's web page in headless Chromium (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser.py, which starts a scripted model server and a gateway and
// passes GATEWAY_URL, GATEWAY_TOKEN and CHROMIUM_PATH. Exits non-zero on the first failed step,
// naming it.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const url = process.env.GATEWAY_URL;
const token = process.env.GATEWAY_TOKEN;
const executablePath = process.env.CHROMIUM_PATH;
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
// A fresh profile directory per run (playwright passes it as --user-data-dir).
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
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
  ],
});
await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
let failed = false;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP_TIMEOUT);
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));

  await step("the page asks for the token and accepts it", async () => {
    await page.goto(url);
    await page.locator("#login").waitFor({ state: "visible" });
    await page.fill("#token", "wrong-token");
    await page.click("#login-form button[type=submit]");
    await page.locator("#login-error", { hasText: "not accepted" }).waitFor();
    await page.fill("#token", token);
    await page.click("#login-form button[type=submit]");
    await page.locator("body[data-ready=true]").waitFor();
    const title = await page.textContent("#session-title");
    check(title.startsWith("main · agent main"), `starts on the main session (got ${title})`);
  });

  await step("a message gets a streamed reply", async () => {
    await page.fill("#input", "hello from the browser");
    await page.press("#input", "Enter");
    await page.locator(".msg.user", { hasText: "hello from the browser" }).waitFor();
    const reply = page.locator(".msg.assistant", { hasText: "hello from the browser" });
    await reply.waitFor();
    const deltas = Number(await reply.getAttribute("data-deltas"));
    check(deltas > 1, `the reply arrived in pieces (got ${deltas} deltas)`);
    await page.locator("#run-state[data-state=idle]").waitFor({ state: "attached" });
  });

  await step("a new session starts empty and a tool call is rendered", async () => {
    await page.click("#new-session");
    await page.locator("#session-title", { hasText: "web-" }).waitFor();
    check((await page.locator(".msg.user").count()) === 0, "no old messages under the new title");
    await page.locator(".empty-hint", { hasText: "No messages yet" }).waitFor();
    check((await page.locator(".msg.user").count()) === 0, "the new session has no messages");
    await page.fill("#input", "read notes.txt");
    await page.press("#input", "Enter");
    const card = page.locator('details.tool[data-tool="read"][data-state="ok"]');
    await card.waitFor();
    await card.locator("summary").click();
    await card.locator("pre.result", { hasText: "The ferry leaves at 9:40." }).waitFor();
    await page.locator(".msg.assistant", { hasText: "The ferry leaves at 9:40." }).waitFor();
  });

  await step("switching back shows the first session's history", async () => {
    await page.click('#sessions button[data-key="agent:main:main"]');
    await page.locator("#session-title", { hasText: /^main · agent main$/ }).waitFor();
    await page.locator(".msg.assistant", { hasText: "hello from the browser" }).waitFor();
    check((await page.locator("details.tool").count()) === 0, "no tool card in the first session");
    check((await page.locator("#sessions li").count()) >= 2, "both sessions are listed");
  });

  await step("a code-mode cell shows its program, nested call, output and value", async () => {
    await page.selectOption("#agent", "coder");
    await page.locator("#session-title", { hasText: /^main · agent coder$/ }).waitFor();
    await page.fill("#input", "run the program");
    await page.press("#input", "Enter");
    const cell = page.locator('.cell[data-tool="exec"][data-status="completed"]');
    await cell.waitFor();
    await cell.locator("pre.program", { hasText: 'tools.call("read"' }).waitFor();
    await cell.locator('.nested details.tool[data-tool="read"][data-state="ok"]').waitFor();
    await cell.locator("pre.output", { hasText: "read the note" }).waitFor();
    await cell.locator("pre.value", { hasText: '"first": "The"' }).waitFor();
  });

  await step("a program that pauses shows as waiting, then resumes", async () => {
    await page.fill("#input", "pause then go on");
    await page.press("#input", "Enter");
    const paused = page.locator('.cell[data-tool="exec"][data-status="waiting"]');
    await paused.waitFor();
    await paused.locator(".waiting-note", { hasText: "yield" }).waitFor();
    await paused.locator("pre.output", { hasText: "before the pause" }).waitFor();
    const resumed = page.locator('.cell[data-tool="wait"][data-status="completed"]');
    await resumed.waitFor();
    await resumed.locator("pre.value", { hasText: "resumed" }).waitFor();
    await page.locator(".msg.assistant", { hasText: "The program ended: completed." }).last().waitFor();
  });

  await step("the token is remembered across a reload", async () => {
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    check(await page.locator("#login").isHidden(), "no login prompt after a reload");
    await page.locator('.cell[data-tool="exec"][data-status=completed]').waitFor();
    await page.locator('.cell[data-tool="exec"][data-status=waiting]').waitFor();
  });

  await step("markup in a reply is shown as text, never executed", async () => {
    await page.selectOption("#agent", "main");
    await page.locator("body[data-ready=true]").waitFor();
    await page.fill("#input", "<img src=x onerror=window.pwned=1> **bold** `code`");
    await page.press("#input", "Enter");
    const reply = page.locator(".msg.assistant", { hasText: "<img src=x onerror=window.pwned=1>" });
    await reply.waitFor();
    check((await reply.locator("img").count()) === 0, "no <img> element was created");
    check((await reply.locator("strong").textContent()) === "bold", "bold is rendered");
    check(!(await page.evaluate(() => window.pwned)), "no script ran");
  });

  await step("a Markdown reply renders lists, tables, links and code with copy buttons", async () => {
    const markdown = [
      "## Plan",
      "",
      "- first item",
      "- second item",
      "",
      "| city | time |",
      "|------|------|",
      "| Oslo | 9:40 |",
      "",
      "See [the docs](https://example.org/docs) and ![a tracker](https://example.org/pixel.png).",
      "",
      "```python",
      "print('copied')",
      "```",
    ].join("\n");
    await page.fill("#input", markdown);
    await page.press("#input", "Enter");
    const reply = page.locator(".msg.assistant", { hasText: "first item" });
    await reply.waitFor();
    check((await reply.locator("h2").textContent()) === "Plan", "a heading");
    check((await reply.locator("ul > li").count()) === 2, "a two-item list");
    check((await reply.locator("table td").first().textContent()) === "Oslo", "a table");
    const link = reply.locator('a[href="https://example.org/docs"]');
    check((await link.getAttribute("rel")) === "noopener noreferrer", "links open without an opener");
    check((await reply.locator("img").count()) === 0, "a remote image is not loaded");
    await reply.locator('a[href="https://example.org/pixel.png"]').waitFor();
    const copy = reply.locator(".code-block button.copy");
    await copy.click();
    await reply.locator(".code-block button.copy[data-copied=true]").waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    check(copied.trim() === "print('copied')", `the code block was copied (got ${copied})`);
    await reply.locator(".msg-actions button.copy").click();
    const whole = await page.evaluate(() => navigator.clipboard.readText());
    check(whole.startsWith("## Plan"), `the reply's Markdown was copied (got ${whole.slice(0, 20)})`);
  });

  await step("a copy button never covers the code of a narrow reply", async () => {
    await page.fill("#input", "```js\nconsole.log(\"hi\")\n```");
    await page.press("#input", "Enter");
    const block = page.locator(".msg.assistant .code-block", { hasText: 'console.log("hi")' });
    await block.waitFor();
    const overlap = await block.evaluate((el) => {
      const range = document.createRange();
      range.selectNodeContents(el.querySelector("pre"));
      const text = range.getBoundingClientRect();
      const button = el.querySelector("button.copy").getBoundingClientRect();
      return text.right > button.left && button.bottom > text.top;
    });
    check(!overlap, "the copy button sits beside the code, not over it");
  });

  await step("the page has a favicon", async () => {
    check((await page.locator('link[rel="icon"]').count()) === 1, "an icon link");
    const response = await fetch(`${url}/favicon.ico`);
    check(response.ok, `the favicon is served (got ${response.status})`);
    check(response.headers.get("content-type").startsWith("image/svg+xml"), "as SVG");
  });

  await step("one-shot API sessions are left out of the list and counted", async () => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "nodmix", messages: [{ role: "user", content: "stateless" }] }),
    });
    check(response.ok, `the API request succeeded (got ${response.status})`);
    const oneShotKey = response.headers.get("x-nodmix-session-key");
    check(oneShotKey.startsWith("agent:main:openai:"), `a one-shot session (got ${oneShotKey})`);
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    await page.locator("#sessions-note", { hasText: "1 one-shot API session not shown" }).waitFor();
    const listed = await page.locator(`#sessions button[data-key="${oneShotKey}"]`).count();
    check(listed === 0, "the one-shot session is not in the list");
  });

  await step("an unreachable model is reported as a clear error", async () => {
    await page.selectOption("#agent", "offline");
    await page.locator("#session-title", { hasText: /agent offline$/ }).waitFor();
    await page.fill("#input", "anyone there?");
    await page.press("#input", "Enter");
    await page.locator(".notice.error", { hasText: "connection refused" }).waitFor();
    await page.locator(".notice.error", { hasText: "is the model server running?" }).waitFor();
    await page.locator("#run-state[data-state=idle]").waitFor({ state: "attached" });
  });

  await step("a message that got no answer is marked, can be sent again, and its error stays after a reload", async () => {
    const failedMessage = page.locator(".msg.user.failed", { hasText: "anyone there?" });
    await failedMessage.waitFor();
    // Retry removes the failed message at once and sends it again: the failed message seen
    // after the click is the retried one.
    await failedMessage.locator("button.retry").click();
    await page.locator(".msg.user.failed", { hasText: "anyone there?" }).waitFor();
    await page.locator("#run-state[data-state=idle]").waitFor({ state: "attached" });
    const failedCount = await page.locator(".msg.user.failed").count();
    check(failedCount === 1, `the retried message replaced the failed one (got ${failedCount})`);
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    await page.locator(".msg.user", { hasText: "anyone there?" }).first().waitFor();
    await page.locator(".notice.error", { hasText: "connection refused" }).first().waitFor();
  });

  await step("a session can be renamed, replaced by /new and read back, and deleted", async () => {
    await page.selectOption("#agent", "main");
    await page.locator("#session-title", { hasText: /agent main$/ }).waitFor();
    await page.locator("body[data-ready=true]").waitFor();
    page.once("dialog", (dialog) => dialog.accept("Trip plans"));
    await page.hover('#sessions li[data-key="agent:main:main"]');
    await page.click('#sessions li[data-key="agent:main:main"] button.rename');
    await page.locator('#sessions button[data-key="agent:main:main"] .name', { hasText: "Trip plans" }).waitFor();
    await page.locator("#session-title", { hasText: "Trip plans" }).waitFor();

    await page.fill("#input", "/new");
    await page.press("#input", "Enter");
    await page.locator("#earlier:not([hidden])").waitFor();
    await page.click("#earlier summary");
    await page.locator("#earlier-list button.earlier", { hasText: "replaced by /new" }).first().click();
    await page.locator("#session-title", { hasText: "read-only" }).waitFor();
    await page.locator(".msg.user", { hasText: "hello from the browser" }).waitFor();
    check(await page.locator("#composer").isHidden(), "an earlier session cannot be written to");
    await page.click('#sessions button[data-key="agent:main:main"]');
    await page.locator("#composer").waitFor({ state: "visible" });

    const other = page.locator('#sessions li[data-key^="agent:main:web-"]').first();
    const otherKey = await other.getAttribute("data-key");
    page.once("dialog", (dialog) => dialog.accept());
    await other.hover();
    await other.locator("button.delete").click();
    await page.locator(`#sessions li[data-key="${otherKey}"]`).waitFor({ state: "detached" });
    await page.locator("#earlier-list button.earlier", { hasText: "deleted" }).waitFor();
  });

  check(pageErrors.length === 0, `no page errors (got: ${pageErrors.join("; ")})`);
} catch (error) {
  failed = true;
  process.stdout.write(`FAILED\n${error.stack || error}\n`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
