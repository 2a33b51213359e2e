// The page link `nodmix gateway` prints carries the token in its fragment: the page keeps it,
// drops it from the address bar, and asks for a token only when it came without one.
//
// Run by tests/gateway/test_browser_token.py with GATEWAY_URL, GATEWAY_TOKEN, PAGE_URL (the
// banner's link) and CHROMIUM_PATH.

import { check, inChromium, step, token, url } from "./harness.mjs";

const link = process.env.PAGE_URL;

await inChromium(async ({ page, pageErrors }) => {
  await step("the banner's link opens the page without asking", async () => {
    check(link.startsWith(`${url}/#token=`), `the link carries the token (${link})`);
    await page.goto(link);
    await page.locator("body[data-ready=true]").waitFor();
    check(await page.locator("#login").isHidden(), "no login form");
    check(!page.url().includes("token"), `the token left the address bar (${page.url()})`);
    const kept = await page.evaluate(() => localStorage.getItem("nodmix.token"));
    check(kept === token, "the page kept the token");
  });

  await step("a reload of the plain address keeps working", async () => {
    await page.goto(url);
    await page.locator("body[data-ready=true]").waitFor();
    check(await page.locator("#login").isHidden(), "still no login form");
  });

  await step("without a kept token the page asks once", async () => {
    await page.evaluate(() => localStorage.clear());
    await page.goto(url);
    await page.locator("#login").waitFor({ state: "visible" });
    check(await page.locator("#app").isHidden(), "nothing of the app before the token");
    await page.fill("#token", token);
    await page.click("#login-form button[type=submit]");
    await page.locator("body[data-ready=true]").waitFor();
    await page.reload();
    await page.locator("body[data-ready=true]").waitFor();
    check(await page.locator("#login").isHidden(), "asked only once");
  });

  await step("a link with a wrong token says so and asks", async () => {
    await page.evaluate(() => localStorage.clear());
    await page.goto(`${url}/#token=not-the-token`);
    await page.locator("#login-error", { hasText: "token in the link was not accepted" }).waitFor();
    const kept = await page.evaluate(() => localStorage.getItem("nodmix.token"));
    check(kept === null, "a refused token is not kept");
    check(pageErrors.length === 0, `no page errors: ${pageErrors.join("; ")}`);
  });
});
