// Sessions of isolated cron-job runs (`agent:<id>:cron:<jobId>:<runId>`, marked `job` by
// `sessions.list`), grouped under their job in the sidebar: one collapsed row per job, below the
// conversations, so a job that runs every few minutes does not push them out of sight.

import { el } from "./render.js";

const openJobs = new Set();

/** Splits list rows into conversations and `{job, runs}` groups (newest run first). */
export function groupJobRuns(rows) {
  const sessions = [];
  const groups = new Map();
  for (const row of rows) {
    if (!row.job) {
      sessions.push(row);
      continue;
    }
    if (!groups.has(row.job.id)) groups.set(row.job.id, { job: row.job, runs: [] });
    groups.get(row.job.id).runs.push(row);
  }
  return { sessions, groups: [...groups.values()] };
}

/** One job's runs as a collapsible row; `sessionRow` renders each run, `activeKey` opens the
 * group that holds the open session. */
export function jobGroup({ job, runs }, sessionRow, activeKey, ago) {
  const rows = runs.map((row) => sessionRow({ ...row, name: `run ${new Date(row.createdAt).toLocaleString()}` }));
  const count = `${runs.length} run${runs.length === 1 ? "" : "s"} · last ${ago(runs[0].updatedAt)}`;
  const details = el(
    "details",
    { class: "job-runs", "data-job": job.id },
    el("summary", {}, el("span", { class: "name" }, `⏱ ${job.name}`), el("span", { class: "meta" }, count)),
    el("ul", { class: "sessions" }, ...rows),
  );
  details.open = openJobs.has(job.id) || runs.some((row) => row.key === activeKey);
  details.addEventListener("toggle", () => (details.open ? openJobs.add(job.id) : openJobs.delete(job.id)));
  return el("li", { class: "job-group" }, details);
}
