"""Implementations of the tools the workflows call, over `benchmarks.value.dataset`.

Each returns the JSON a real API would (as the result text, which is what a direct-mode model
reads) and the same data as `details` (what a code-mode program gets as structured data).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from benchmarks.value import dataset
from nodmix.tools import ToolContext, ToolResult

Body = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]
BODIES: dict[str, Body] = {}


def _tool(name: str) -> Callable[[Callable[[dict[str, Any]], Any]], Callable[..., Any]]:
    def register(fn: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
        async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            data = fn(args)
            text = data if isinstance(data, str) else json.dumps(data)
            return ToolResult.text(text, details=None if isinstance(data, str) else data)

        BODIES[name] = body
        return fn

    return register


@cache
def _invoices() -> list[dict[str, Any]]:
    return dataset.invoices()


@cache
def _tickets() -> list[dict[str, Any]]:
    return dataset.tickets()


@cache
def _employees() -> list[dict[str, Any]]:
    return dataset.employees()


def _page(items: list[dict[str, Any]], args: dict[str, Any], default: int) -> dict[str, Any]:
    start = int(args.get("cursor") or 0)
    limit = int(args.get("limit") or default)
    chunk = items[start : start + limit]
    more = start + limit < len(items)
    return {
        "object": "list",
        "data": chunk,
        "has_more": more,
        "next_cursor": str(start + limit) if more else None,
    }


@_tool("crm_contact_lookup")
def _contact_lookup(args: dict[str, Any]) -> Any:
    return dataset.contact(str(args.get("email", "")))


@_tool("crm_account_get")
def _account_get(args: dict[str, Any]) -> Any:
    company = str(args["account_id"]).removeprefix("acc_").capitalize()
    return dataset.account(company)


@_tool("payments_invoice_list")
def _invoice_list(args: dict[str, Any]) -> Any:
    items = [i for i in _invoices() if i["status"] == args.get("status", i["status"])]
    return _page(items, args, 50)


@_tool("helpdesk_ticket_search")
def _ticket_search(args: dict[str, Any]) -> Any:
    words = str(args["query"]).lower().split()
    hits = []
    for t in _tickets():
        haystack = f"{t['subject']} {t['description']} {t['organization']}".lower()
        if all(w in haystack for w in words):
            hits.append({k: v for k, v in t.items() if k not in ("comments", "description")})
    limit = int(args.get("limit") or 25)
    return {"count": len(hits), "results": hits[:limit]}


@_tool("helpdesk_ticket_get")
def _ticket_get(args: dict[str, Any]) -> Any:
    return next(t for t in _tickets() if t["id"] == args["ticket_id"])


@_tool("pagerduty_schedule_list")
def _schedule_list(args: dict[str, Any]) -> Any:
    query = str(args.get("query", "")).lower()
    found = [s for s in dataset.schedules() if query in s["name"].lower()]
    return {"schedules": found, "more": False}


@_tool("pagerduty_oncall_get")
def _oncall_get(args: dict[str, Any]) -> Any:
    return {"oncalls": [dataset.oncall(str(args.get("schedule_id", "")))]}


@_tool("calendar_freebusy_query")
def _freebusy(args: dict[str, Any]) -> Any:
    day = dt.date.fromisoformat(str(args["from"])[:10])
    calendars = {a: {"busy": dataset.busy(a, day), "errors": []} for a in args["attendees"]}
    return {"time_min": args["from"], "time_max": args["to"], "calendars": calendars}


@_tool("calendar_event_create")
def _event_create(args: dict[str, Any]) -> Any:
    return {
        "id": "evt_7f3a9c",
        "status": "confirmed",
        "html_link": "https://calendar.example/event?eid=evt_7f3a9c",
        "organizer": {"email": "me@ourco.example", "self": True},
        "created": "2026-03-02T09:31:00Z",
        "reminders": {"use_default": True},
        **args,
    }


@_tool("email_message_send")
def _message_send(args: dict[str, Any]) -> Any:
    return {"id": "msg_18c2e", "thread_id": "thr_18c2e", "label_ids": ["SENT"], "to": args["to"]}


@_tool("ci_pipeline_list")
def _pipeline_list(args: dict[str, Any]) -> Any:
    items = dataset.pipelines(str(args["repository"]))[: int(args.get("limit") or 20)]
    return {"pipelines": items}


@_tool("ci_job_list")
def _job_list(args: dict[str, Any]) -> Any:
    items = dataset.jobs(str(args["pipeline_id"]))
    status = args.get("status")
    return {"jobs": [j for j in items if status is None or j["status"] == status]}


@_tool("ci_job_log_get")
def _job_log(args: dict[str, Any]) -> Any:
    tail = args.get("tail")
    return dataset.job_log(str(args["job_id"]), int(tail) if tail else None)


@_tool("git_commit_list")
def _commit_list(args: dict[str, Any]) -> Any:
    items = dataset.commits(str(args["repository"]))[: int(args.get("limit") or 30)]
    return {"commits": items}


@_tool("hr_employee_list")
def _employee_list(args: dict[str, Any]) -> Any:
    return _page(_employees(), args, 50)
