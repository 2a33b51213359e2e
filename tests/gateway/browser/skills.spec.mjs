// The web page's skills panel in headless Chromium (Debian's, through playwright-core).
//
// Run by tests/gateway/test_browser_skills.py, which starts a gateway whose workspace holds a
// ready skill and a blocked one, and passes GATEWAY_URL, GATEWAY_TOKEN, CHROMIUM_PATH and
// SKILLS_DIR (the workspace's skills folder). Exits non-zero on the first failed step.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { check, inChromium, logIn, step } from "./harness.mjs";

const skillsDir = process.env.SKILLS_DIR;

await inChromium(async ({ page, pageErrors }) => {
  await step("the sidebar counts ready skills out of all found", async () => {
    await logIn(page);
    const count = await page.textContent("#skills-count");
    const [ready, all] = count.split("/").map(Number);
    check(all === ready + 1, `one blocked skill (got ${count})`);
  });

  await step("opening the panel lists skills and says why one is blocked", async () => {
    await page.click("#skills-panel summary");
    await page.locator('.skill[data-skill="trip"]', { hasText: "Plan a trip." }).waitFor();
    const blocked = page.locator('.skill.blocked[data-skill="radar"]');
    await blocked.waitFor();
    const why = await blocked.textContent();
    check(why.includes("missing binary: nodmix-test-no-such-bin"), `names the binary (got ${why})`);
  });

  await step("a skill folder added meanwhile shows when the panel is reopened", async () => {
    mkdirSync(join(skillsDir, "late"), { recursive: true });
    writeFileSync(
      join(skillsDir, "late", "SKILL.md"),
      "---\nname: late\ndescription: Added while the page was open.\n---\nBody.\n",
    );
    await page.click("#skills-panel summary");
    await page.click("#skills-panel summary");
    await page.locator('.skill[data-skill="late"]', { hasText: "Added while" }).waitFor();
    check(pageErrors.length === 0, `no page errors (got ${pageErrors.join("; ")})`);
  });
});
