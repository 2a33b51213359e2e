// The sidebar's skills panel: every skill found for the selected agent (`skills.list`), with
// why a skill is not offered. Skill folders are rescanned on each request, so reopening the
// panel shows skills added since without a restart.

import { el } from "./render.js";

const $ = (id) => document.getElementById(id);

function skillRow(skill) {
  const why = skill.eligible ? skill.source : skill.reasons.join("; ");
  return el(
    "li",
    { class: `skill${skill.eligible ? "" : " blocked"}`, "data-skill": skill.name, title: skill.path },
    el("span", { class: "name" }, skill.name),
    el("span", { class: "meta" }, skill.description),
    el("span", { class: "meta why" }, why),
  );
}

export async function refreshSkills(socket, agentId) {
  let listing;
  try {
    listing = await socket.request("skills.list", { agentId });
  } catch (error) {
    $("skills-count").textContent = "?";
    $("skills-list").replaceChildren(el("li", { class: "meta" }, `skills: ${error.message}`));
    return;
  }
  const ready = listing.skills.filter((skill) => skill.eligible).length;
  $("skills-count").textContent = `${ready}/${listing.skills.length}`;
  const rows = listing.skills.map(skillRow);
  for (const problem of listing.problems) rows.push(el("li", { class: "meta problem" }, problem));
  $("skills-list").replaceChildren(...rows);
}

export function wireSkills(socket, currentAgent) {
  $("skills-panel").addEventListener("toggle", () => {
    if ($("skills-panel").open) refreshSkills(socket(), currentAgent());
  });
}
