"""Six multi-step tasks, each scripted twice: as a direct-mode model and as a code-mode model.

A direct-mode script is a generator: it yields the tool calls of one model step (independent
calls in parallel, as a capable model would), receives their parsed results and finally returns
the facts of its answer. A code-mode script is one JavaScript program (written against the tool
ids the model found with `tools.search`) whose return value holds the same facts. The benchmark
checks that both modes arrive at identical facts, so neither side is doing less work.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from benchmarks.value.dataset import TODAY

Facts = Any
Direct = Generator[list["Call"], list[Any], Facts]
REPO = "acme/web-app"
PEOPLE = ["dana@ourco.example", "eli@ourco.example", "fatima@ourco.example"]
EMAILS = ["alice@northwind.example", "bo@contoso.example", "chen@fabrikam.example"]
TOMORROW = TODAY + dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Workflow:
    name: str
    prompt: str
    discovery: dict[str, tuple[str, str]]
    """Capability -> (what the code-mode model searches for, the tool it expects)."""
    program: str
    """The code-mode program; `IDS` is bound to the ids the model chose."""

    @property
    def tools(self) -> list[str]:
        return [expected for _, expected in self.discovery.values()]

    def code(self, ids: dict[str, str]) -> str:
        return f"const IDS = {json.dumps(ids)};\n{self.program.strip()}"

    def direct(self) -> Direct:
        return DIRECT[self.name]()


# ---- 1. join three records ----------------------------------------------------------------


def _join() -> Direct:
    contacts = yield [Call("crm_contact_lookup", {"email": e}) for e in EMAILS]
    accounts = yield [Call("crm_account_get", {"account_id": c["account_id"]}) for c in contacts]
    return [
        {
            "email": c["email"],
            "name": f"{c['first_name']} {c['last_name']}",
            "company": a["name"],
            "tier": a["tier"],
            "owner": a["owner"]["name"],
        }
        for c, a in zip(contacts, accounts, strict=True)
    ]


JOIN = Workflow(
    "join",
    f"Look up {', '.join(EMAILS)} in the CRM and tell me, for each, their company, the "
    "account tier and who owns the account.",
    {
        "lookup": ("find a CRM contact by email address", "crm_contact_lookup"),
        "account": ("get a CRM account by id", "crm_account_get"),
    },
    f"""
const emails = {json.dumps(EMAILS)};
const contacts = await Promise.all(emails.map((email) => tools.call(IDS.lookup, {{ email }})));
return await Promise.all(contacts.map(async ({{ details: c }}) => {{
  const {{ details: a }} = await tools.call(IDS.account, {{ account_id: c.account_id }});
  return {{ email: c.email, name: `${{c.first_name}} ${{c.last_name}}`, company: a.name,
           tier: a.tier, owner: a.owner.name }};
}}));
""",
)

# ---- 2. search, filter, summarise ---------------------------------------------------------

CUTOFF = (TODAY - dt.timedelta(days=30)).isoformat()


def _overdue() -> Direct:
    invoices: list[dict[str, Any]] = []
    cursor = None
    while True:
        args: dict[str, Any] = {"status": "open", "limit": 100}
        if cursor:
            args["cursor"] = cursor
        (page,) = yield [Call("payments_invoice_list", args)]
        invoices += page["data"]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    late = [i for i in invoices if i["due_date"] < CUTOFF]
    totals: dict[str, int] = {}
    for inv in late:
        totals[inv["currency"]] = totals.get(inv["currency"], 0) + inv["amount_due"]
    top = sorted(late, key=lambda i: (-i["amount_due"], i["number"]))[:5]
    return {
        "count": len(late),
        "totals": dict(sorted(totals.items())),
        "largest": [[i["number"], i["customer_name"], i["amount_due"], i["currency"]] for i in top],
    }


OVERDUE = Workflow(
    "overdue",
    "Which open invoices are more than 30 days overdue? Give me the total overdue per currency "
    "and the five largest.",
    {"invoices": ("list open invoices", "payments_invoice_list")},
    f"""
const cutoff = "{CUTOFF}";
const late = [];
let cursor = null;
do {{
  const {{ details: page }} = await tools.call(IDS.invoices,
    cursor ? {{ status: "open", limit: 100, cursor }} : {{ status: "open", limit: 100 }});
  late.push(...page.data.filter((i) => i.due_date < cutoff));
  cursor = page.has_more ? page.next_cursor : null;
}} while (cursor);
const totals = {{}};
for (const i of late) totals[i.currency] = (totals[i.currency] || 0) + i.amount_due;
const sorted = Object.fromEntries(Object.keys(totals).sort().map((k) => [k, totals[k]]));
const top = [...late].sort((a, b) => b.amount_due - a.amount_due ||
  (a.number < b.number ? -1 : 1)).slice(0, 5);
return {{ count: late.length, totals: sorted,
         largest: top.map((i) => [i.number, i.customer_name, i.amount_due, i.currency]) }};
""",
)

# ---- 3. triage: search tickets, read the urgent ones, find who is on call ------------------


def _triage() -> Direct:
    found, schedules = yield [
        Call("helpdesk_ticket_search", {"query": "Globex", "limit": 25}),
        Call("pagerduty_schedule_list", {"query": "support"}),
    ]
    urgent = [t for t in found["results"] if t["priority"] == "urgent" and t["status"] == "open"]
    schedule = next(s for s in schedules["schedules"] if "Tier 2" in s["name"])
    results = yield [
        *(Call("helpdesk_ticket_get", {"ticket_id": t["id"]}) for t in urgent),
        Call("pagerduty_oncall_get", {"schedule_id": schedule["id"]}),
    ]
    person = results[-1]["oncalls"][0]
    return {
        "tickets": [
            {"id": t["id"], "subject": t["subject"], "comments": len(t["comments"])}
            for t in results[:-1]
        ],
        "oncall": {"name": person["user"]["name"], "phone": person["phone"]},
    }


TRIAGE = Workflow(
    "triage",
    "Summarise the urgent open support tickets from Globex and tell me who is on call for "
    "Tier 2 support escalation right now.",
    {
        "search": ("search support tickets", "helpdesk_ticket_search"),
        "ticket": ("get a support ticket with its comments", "helpdesk_ticket_get"),
        "schedules": ("list on-call schedules", "pagerduty_schedule_list"),
        "oncall": ("who is on call right now", "pagerduty_oncall_get"),
    },
    """
const [{ details: found }, { details: sched }] = await Promise.all([
  tools.call(IDS.search, { query: "Globex", limit: 25 }),
  tools.call(IDS.schedules, { query: "support" }),
]);
const urgent = found.results.filter((t) => t.priority === "urgent" && t.status === "open");
const schedule = sched.schedules.find((s) => s.name.includes("Tier 2"));
const [full, { details: on }] = await Promise.all([
  Promise.all(urgent.map((t) => tools.call(IDS.ticket, { ticket_id: t.id }))),
  tools.call(IDS.oncall, { schedule_id: schedule.id }),
]);
const person = on.oncalls[0];
return {
  tickets: full.map(({ details: t }) => ({ id: t.id, subject: t.subject,
                                          comments: t.comments.length })),
  oncall: { name: person.user.name, phone: person.phone },
};
""",
)

# ---- 4. schedule: free/busy, first common slot, create the event, email it -----------------

_DAY = TOMORROW.isoformat()


def _first_free(calendars: dict[str, Any]) -> tuple[str, str]:
    for half in range(18, 34):
        start = f"{_DAY}T{half // 2:02d}:{30 * (half % 2):02d}:00Z"
        end = f"{_DAY}T{(half + 1) // 2:02d}:{30 * ((half + 1) % 2):02d}:00Z"
        if all(
            not (b["start"] < end and b["end"] > start)
            for cal in calendars.values()
            for b in cal["busy"]
        ):
            return start, end
    raise LookupError("no common slot")


def _schedule() -> Direct:
    (busy,) = yield [
        Call(
            "calendar_freebusy_query",
            {"attendees": PEOPLE, "from": f"{_DAY}T09:00:00Z", "to": f"{_DAY}T17:00:00Z"},
        )
    ]
    start, end = _first_free(busy["calendars"])
    (event,) = yield [
        Call(
            "calendar_event_create",
            {"title": "Launch review", "start": start, "end": end, "description": "Go/no-go."},
        )
    ]
    body = f"Launch review is booked for {start} to {end}: {event['html_link']}"
    (sent,) = yield [
        Call("email_message_send", {"to": PEOPLE, "subject": "Launch review", "body": body})
    ]
    return {"start": start, "end": end, "event": event["id"], "email": sent["id"]}


SCHEDULE = Workflow(
    "schedule",
    f"Find the first 30-minute slot tomorrow between 09:00 and 17:00 UTC when {', '.join(PEOPLE)} "
    "are all free, put a 'Launch review' event in my calendar and email the three of them the "
    "time.",
    {
        "freebusy": ("check when people are free or busy", "calendar_freebusy_query"),
        "create": ("create a calendar event", "calendar_event_create"),
        "email": ("send an email", "email_message_send"),
    },
    f"""
const people = {json.dumps(PEOPLE)};
const day = "{_DAY}";
const {{ details: fb }} = await tools.call(IDS.freebusy,
  {{ attendees: people, from: `${{day}}T09:00:00Z`, to: `${{day}}T17:00:00Z` }});
const at = (h) =>
  `${{day}}T${{String(Math.floor(h / 2)).padStart(2, "0")}}:${{h % 2 ? "30" : "00"}}:00Z`;
let start, end;
for (let h = 18; h < 34 && !start; h++) {{
  const s = at(h), e = at(h + 1);
  const free = Object.values(fb.calendars)
    .every((c) => c.busy.every((b) => !(b.start < e && b.end > s)));
  if (free) {{ start = s; end = e; }}
}}
const {{ details: event }} = await tools.call(IDS.create,
  {{ title: "Launch review", start, end, description: "Go/no-go." }});
const body = `Launch review is booked for ${{start}} to ${{end}}: ${{event.html_link}}`;
const {{ details: sent }} = await tools.call(IDS.email,
  {{ to: people, subject: "Launch review", body }});
return {{ start, end, event: event.id, email: sent.id }};
""",
)

# ---- 5. CI failure: pipeline -> failed job -> log, commits -> likely culprit ----------------


def _ci() -> Direct:
    (listed,) = yield [Call("ci_pipeline_list", {"repository": REPO, "limit": 20})]
    failed = next(p for p in listed["pipelines"] if p["ref"] == "main" and p["status"] == "failed")
    jobs, history = yield [
        Call("ci_job_list", {"pipeline_id": failed["id"], "status": "failed"}),
        Call("git_commit_list", {"repository": REPO, "branch": "main", "limit": 10}),
    ]
    job = jobs["jobs"][0]
    (log,) = yield [Call("ci_job_log_get", {"job_id": job["id"], "tail": 400})]
    lines = log.splitlines()
    path = next(line.split()[1] for line in lines if line.strip().startswith("FAIL"))
    test = next(line.strip()[2:] for line in lines if line.strip().startswith("●"))
    error = [line.strip() for line in lines if line.strip().startswith(("Expected", "Received"))]
    module = path.removeprefix("tests/").removesuffix(".test.ts")
    commits = history["commits"]
    start = next(i for i, c in enumerate(commits) if c["sha"] == failed["sha"])
    culprit = next(c for c in commits[start:] if any(module in f for f in c["files"]))
    return {
        "pipeline": failed["id"],
        "job": job["name"],
        "test": f"{path}: {test}",
        "error": error,
        "commit": [culprit["sha"][:10], culprit["message"], culprit["author"]["name"]],
    }


CI = Workflow(
    "ci_failure",
    f"The latest pipeline on main in {REPO} failed. Which test failed, with what error, and "
    "which recent commit most likely caused it?",
    {
        "pipelines": ("list CI pipelines of a repository", "ci_pipeline_list"),
        "jobs": ("list the jobs of a pipeline", "ci_job_list"),
        "log": ("get the log output of a CI job", "ci_job_log_get"),
        "commits": ("list recent commits on a branch", "git_commit_list"),
    },
    f"""
const repo = "{REPO}";
const {{ details: listed }} = await tools.call(IDS.pipelines, {{ repository: repo, limit: 20 }});
const failed = listed.pipelines.find((p) => p.ref === "main" && p.status === "failed");
const [{{ details: jobs }}, {{ details: history }}] = await Promise.all([
  tools.call(IDS.jobs, {{ pipeline_id: failed.id, status: "failed" }}),
  tools.call(IDS.commits, {{ repository: repo, branch: "main", limit: 10 }}),
]);
const job = jobs.jobs[0];
const lines = (await tools.call(IDS.log, {{ job_id: job.id, tail: 400 }})).text.split("\\n")
  .map((l) => l.trim());
const path = lines.find((l) => l.startsWith("FAIL")).split(/\\s+/)[1];
const test = lines.find((l) => l.startsWith("●")).slice(2);
const error = lines.filter((l) => l.startsWith("Expected") || l.startsWith("Received"));
const module = path.replace(/^tests\\//, "").replace(/\\.test\\.ts$/, "");
const commits = history.commits;
const from = commits.findIndex((c) => c.sha === failed.sha);
const culprit = commits.slice(from).find((c) => c.files.some((f) => f.includes(module)));
return {{ pipeline: failed.id, job: job.name, test: `${{path}}: ${{test}}`, error,
         commit: [culprit.sha.slice(0, 10), culprit.message, culprit.author.name] }};
""",
)

# ---- 6. aggregate a paginated directory -----------------------------------------------------


def _headcount() -> Direct:
    people: list[dict[str, Any]] = []
    cursor = None
    while True:
        args: dict[str, Any] = {"limit": 200}
        if cursor:
            args["cursor"] = cursor
        (page,) = yield [Call("hr_employee_list", args)]
        people += page["data"]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    departments: dict[str, int] = {}
    reports: dict[str, int] = {}
    for p in people:
        departments[p["department"]] = departments.get(p["department"], 0) + 1
        if p["manager_id"]:
            reports[p["manager_id"]] = reports.get(p["manager_id"], 0) + 1
    names = {p["id"]: f"{p['first_name']} {p['last_name']}" for p in people}
    big = sorted((-n, m) for m, n in reports.items() if n > 15)
    return {
        "departments": dict(sorted(departments.items())),
        "big_teams": [[m, names[m], -n] for n, m in big],
    }


HEADCOUNT = Workflow(
    "headcount",
    "How many active employees does each department have, and which managers have more than "
    "15 direct reports?",
    {"employees": ("list all employees", "hr_employee_list")},
    """
const people = [];
let cursor = null;
do {
  const { details: page } = await tools.call(IDS.employees,
    cursor ? { limit: 200, cursor } : { limit: 200 });
  people.push(...page.data);
  cursor = page.has_more ? page.next_cursor : null;
} while (cursor);
const departments = {}, reports = {}, names = {};
for (const p of people) {
  departments[p.department] = (departments[p.department] || 0) + 1;
  if (p.manager_id) reports[p.manager_id] = (reports[p.manager_id] || 0) + 1;
  names[p.id] = `${p.first_name} ${p.last_name}`;
}
const big = Object.entries(reports).filter(([, n]) => n > 15)
  .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
return {
  departments: Object.fromEntries(Object.keys(departments).sort().map((k) => [k, departments[k]])),
  big_teams: big.map(([m, n]) => [m, names[m], n]),
};
""",
)

DIRECT = {
    "join": _join,
    "overdue": _overdue,
    "triage": _triage,
    "schedule": _schedule,
    "ci_failure": _ci,
    "headcount": _headcount,
}
WORKFLOWS = (JOIN, OVERDUE, TRIAGE, SCHEDULE, CI, HEADCOUNT)
