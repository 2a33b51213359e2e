"""Deterministic records behind the workflow tools: contacts, accounts, invoices, tickets,
on-call schedules, calendars, CI pipelines and logs, commits and employees.

Records have the breadth of real API responses (ids, timestamps, nested objects, URLs), so the
bytes a tool result costs in direct mode are realistic. Everything derives from fixed seeds.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

TODAY = dt.date(2026, 3, 2)
FIRST = ["Alice", "Bo", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jun", "Kofi"]
FIRST += ["Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tariq", "Uma"]
LAST = ["Okafor", "Lindqvist", "Wei", "Moreau", "Haddad", "Novak", "Silva", "Tanaka", "Kowalski"]
LAST += ["Brennan", "Mensah", "Rossi", "Ibrahim", "Jensen", "Duarte", "Patel", "Schmidt", "Adeyemi"]
COMPANIES = ["Northwind", "Contoso", "Fabrikam", "Globex", "Initech", "Umbrella", "Hooli"]
COMPANIES += ["Vandelay", "Wonka", "Stark", "Wayne", "Tyrell", "Cyberdyne", "Soylent"]
CITIES = [("Lisbon", "PT"), ("Austin", "US"), ("Berlin", "DE"), ("Osaka", "JP"), ("Leeds", "GB")]
DEPARTMENTS = ["engineering", "sales", "marketing", "support", "finance", "people", "operations"]


def _iso(day: dt.date, hour: int = 9, minute: int = 0) -> str:
    return f"{day.isoformat()}T{hour:02d}:{minute:02d}:00Z"


def _address(rng: random.Random) -> dict[str, Any]:
    city, country = rng.choice(CITIES)
    return {
        "line1": f"{rng.randint(1, 400)} {rng.choice(['Harbour', 'Mill', 'Station', 'Oak'])} St",
        "city": city,
        "postal_code": f"{rng.randint(10000, 99999)}",
        "country": country,
    }


def account(company: str) -> dict[str, Any]:
    """A CRM account with its owner."""
    rng = random.Random(f"account:{company}")
    owner = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    slug = company.lower()
    return {
        "id": f"acc_{slug}",
        "name": f"{company} Ltd",
        "domain": f"{slug}.example",
        "industry": rng.choice(["software", "retail", "finance", "manufacturing"]),
        "employee_count": rng.randint(40, 9000),
        "annual_revenue": {"amount": rng.randint(2, 900) * 100_000, "currency": "USD"},
        "tier": rng.choice(["strategic", "enterprise", "mid_market", "smb"]),
        "owner": {"id": f"usr_{rng.randint(100, 999)}", "name": owner, "email": _email(owner)},
        "billing_address": _address(rng),
        "health_score": rng.randint(20, 99),
        "renewal_date": (TODAY + dt.timedelta(days=rng.randint(10, 300))).isoformat(),
        "open_deals": rng.randint(0, 6),
        "created_at": _iso(TODAY - dt.timedelta(days=rng.randint(200, 2000))),
        "updated_at": _iso(TODAY - dt.timedelta(days=rng.randint(0, 30))),
    }


def _email(name: str, domain: str = "ourco.example") -> str:
    return name.lower().replace(" ", ".") + "@" + domain


def contact(email: str) -> dict[str, Any] | None:
    """The CRM contact with this email (`first@company.example`), or None."""
    local, _, domain = email.partition("@")
    company = domain.split(".")[0].capitalize()
    if company not in COMPANIES:
        return None
    rng = random.Random(f"contact:{email}")
    first = local.capitalize()
    return {
        "id": f"con_{rng.randint(10**7, 10**8 - 1)}",
        "first_name": first,
        "last_name": rng.choice(LAST),
        "email": email,
        "phone": f"+1415555{rng.randint(1000, 9999)}",
        "title": rng.choice(["VP Engineering", "Head of Procurement", "CTO", "IT Manager"]),
        "account_id": f"acc_{company.lower()}",
        "owner_id": f"usr_{rng.randint(100, 999)}",
        "lifecycle_stage": rng.choice(["sql", "customer", "customer"]),
        "address": _address(rng),
        "tags": rng.sample(["renewal-2026", "champion", "beta", "exec-sponsor", "webinar"], 2),
        "last_activity_at": _iso(TODAY - dt.timedelta(days=rng.randint(0, 60))),
        "created_at": _iso(TODAY - dt.timedelta(days=rng.randint(100, 900))),
    }


def invoices() -> list[dict[str, Any]]:
    """260 open invoices, due dates spread over the last 90 and next 30 days."""
    rng = random.Random("invoices")
    out = []
    for n in range(260):
        company = rng.choice(COMPANIES)
        currency = rng.choice(["USD", "USD", "EUR", "GBP"])
        lines: list[dict[str, Any]] = [
            {
                "description": rng.choice(["Platform seats", "Support plan", "Overage", "Setup"]),
                "quantity": rng.randint(1, 40),
                "unit_amount": rng.choice([49, 99, 250, 1200]),
            }
            for _ in range(rng.randint(1, 3))
        ]
        total = sum(item["quantity"] * item["unit_amount"] for item in lines)
        due = TODAY + dt.timedelta(days=rng.randint(-90, 30))
        out.append(
            {
                "id": f"in_{rng.getrandbits(40):010x}",
                "number": f"INV-{2026_0000 + n}",
                "customer_id": f"cus_{company.lower()}",
                "customer_name": f"{company} Ltd",
                "status": "open",
                "currency": currency,
                "amount_due": total,
                "amount_paid": 0,
                "due_date": due.isoformat(),
                "created_at": _iso(due - dt.timedelta(days=30)),
                "line_items": lines,
                "attempt_count": rng.randint(0, 3),
                "hosted_invoice_url": f"https://pay.example/i/{n:05d}",
            }
        )
    return out


def tickets() -> list[dict[str, Any]]:
    """Support tickets across organisations (Globex has several urgent open ones)."""
    rng = random.Random("tickets")
    topics = [
        (
            "SSO login loop after IdP certificate rotation",
            "Users are redirected back to the "
            "login page after the IdP rotated its signing certificate this morning.",
        ),
        (
            "Export to CSV times out for large reports",
            "Exports over ~50k rows fail after 60 s with a gateway timeout; smaller exports work.",
        ),
        (
            "Webhook deliveries delayed by 20+ minutes",
            "Order webhooks arrive late since the weekend; the status page shows no incident.",
        ),
        (
            "Invoices show the wrong VAT rate",
            "German customers are charged 16% instead of 19% on invoices created since March 1.",
        ),
        (
            "API returns 500 on bulk update",
            "PATCH /v2/items with more than 200 items returns 500 with no error body.",
        ),
        (
            "Mobile app crashes on launch (Android 15)",
            "The app closes immediately on Pixel 9 devices after the latest update.",
        ),
    ]
    out = []
    for n in range(60):
        org = COMPANIES[n % len(COMPANIES)]
        subject, body = topics[rng.randrange(len(topics))]
        urgent = org == "Globex" and n < 50
        out.append(
            {
                "id": f"T-{48000 + n}",
                "subject": subject,
                "description": body,
                "organization": f"{org} Ltd",
                "organization_id": f"org_{org.lower()}",
                "requester_email": f"{rng.choice(FIRST).lower()}@{org.lower()}.example",
                "status": "open" if urgent or rng.random() < 0.5 else "solved",
                "priority": "urgent" if urgent else rng.choice(["low", "normal", "high"]),
                "assignee_id": f"agent_{rng.randint(10, 40)}",
                "group": rng.choice(["Tier 1", "Tier 2", "Billing"]),
                "tags": rng.sample(["sso", "api", "billing", "mobile", "enterprise"], 2),
                "created_at": _iso(TODAY - dt.timedelta(days=rng.randint(0, 14))),
                "updated_at": _iso(TODAY - dt.timedelta(days=rng.randint(0, 2))),
                "comments": [
                    {
                        "author": rng.choice(FIRST),
                        "public": rng.random() < 0.7,
                        "body": f"{body} Repro steps and a HAR file are attached (#{k}).",
                        "created_at": _iso(TODAY - dt.timedelta(days=k)),
                    }
                    for k in range(rng.randint(1, 4))
                ],
            }
        )
    return out


def schedules() -> list[dict[str, Any]]:
    return [
        {"id": "PSCH01", "name": "Support escalation (Tier 2)", "time_zone": "Europe/Lisbon"},
        {"id": "PSCH02", "name": "Platform SRE primary", "time_zone": "America/Chicago"},
        {"id": "PSCH03", "name": "Billing support", "time_zone": "Europe/London"},
    ]


def oncall(schedule_id: str) -> dict[str, Any]:
    rng = random.Random(f"oncall:{schedule_id}")
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    return {
        "schedule_id": schedule_id,
        "user": {"id": f"PU{rng.randint(1000, 9999)}", "name": name, "email": _email(name)},
        "phone": f"+3519{rng.randint(10**7, 10**8 - 1)}",
        "escalation_level": 1,
        "start": _iso(TODAY, 8),
        "end": _iso(TODAY + dt.timedelta(days=7), 8),
    }


def busy(email: str, day: dt.date) -> list[dict[str, str]]:
    """Busy blocks of one person on a day (working hours, 30-minute grid)."""
    rng = random.Random(f"busy:{email}:{day}")
    slots = sorted(rng.sample(range(18, 34), 7))  # half-hour indexes from 09:00 to 17:00
    return [
        {
            "start": _iso(day, s // 2, 30 * (s % 2)),
            "end": _iso(day, (s + 1) // 2, 30 * ((s + 1) % 2)),
        }
        for s in slots
    ]


def commits(repository: str) -> list[dict[str, Any]]:
    """Recent commits on main, newest first."""
    rng = random.Random(f"commits:{repository}")
    messages = [
        ("Bump checkout SDK to 4.2", ["package.json", "package-lock.json"]),
        ("Round VAT to two decimals before summing lines", ["src/billing/tax.ts"]),
        ("Add retry to webhook sender", ["src/webhooks/send.ts"]),
        ("Fix flaky date picker test", ["tests/ui/date-picker.test.ts"]),
        ("Refactor cart totals into a pure function", ["src/cart/totals.ts"]),
        ("Update copy on pricing page", ["src/pages/pricing.tsx"]),
    ]
    out = []
    for n in range(30):
        message, files = messages[(n * 5) % len(messages)]
        author = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        out.append(
            {
                "sha": f"{rng.getrandbits(160):040x}",
                "message": message,
                "author": {"name": author, "email": _email(author, "acme.example")},
                "committed_at": _iso(TODAY - dt.timedelta(hours=5 * n)),
                "files": files,
                "parents": [f"{rng.getrandbits(160):040x}"],
                "url": f"https://code.example/{repository}/commit/{n}",
            }
        )
    return out


def pipelines(repository: str) -> list[dict[str, Any]]:
    """Recent pipelines, newest first; the latest one on main failed."""
    shas = [c["sha"] for c in commits(repository)]
    rng = random.Random(f"pipelines:{repository}")
    out = []
    for n in range(20):
        branch = "main" if n % 2 == 0 else rng.choice(["feat/cart", "fix/tax", "chore/deps"])
        status = "failed" if n == 2 else rng.choice(["success", "success", "success", "failed"])
        out.append(
            {
                "id": f"pl_{9100 - n}",
                "repository": repository,
                "ref": branch,
                "sha": shas[n],
                "status": status if n else "running",
                "source": rng.choice(["push", "merge_request", "schedule"]),
                "created_at": _iso(TODAY - dt.timedelta(hours=3 * n)),
                "duration_seconds": rng.randint(240, 1400),
                "triggered_by": rng.choice(FIRST).lower(),
                "web_url": f"https://ci.example/{repository}/pipelines/{9100 - n}",
            }
        )
    return out


def jobs(pipeline_id: str) -> list[dict[str, Any]]:
    names = ["lint", "typecheck", "unit-tests", "integration-tests", "build", "deploy-preview"]
    rng = random.Random(f"jobs:{pipeline_id}")
    return [
        {
            "id": f"job_{pipeline_id[3:]}_{k}",
            "pipeline_id": pipeline_id,
            "name": name,
            "stage": "test" if "test" in name or name in ("lint", "typecheck") else "build",
            "status": "failed" if name == "unit-tests" else "success",
            "runner": f"runner-{rng.randint(1, 12)}",
            "started_at": _iso(TODAY, 6, 5 * k),
            "duration_seconds": rng.randint(30, 600),
        }
        for k, name in enumerate(names)
    ]


def job_log(job_id: str, tail: int | None) -> str:
    """A long test log with one failing test near the end."""
    rng = random.Random(f"log:{job_id}")
    lines = [f"$ npm ci  # runner {job_id}", "added 1422 packages in 31s"]
    for n in range(360):
        suite = rng.choice(["cart", "checkout", "pricing", "webhooks", "billing"])
        lines.append(f"  PASS  tests/{suite}/case-{n:03d}.test.ts ({rng.randint(3, 900)} ms)")
    lines += [
        "  FAIL  tests/billing/tax.test.ts",
        "    ● VAT › rounds each line before summing (DE, 19%)",
        "      expect(received).toBe(expected)",
        "      Expected: 119.00",
        "      Received: 118.99",
        "        at Object.<anonymous> (tests/billing/tax.test.ts:42:31)",
        "Tests: 1 failed, 360 passed, 361 total",
        "ERROR: Job failed: exit code 1",
    ]
    return "\n".join(lines[-tail:] if tail else lines)


def employees() -> list[dict[str, Any]]:
    """430 active employees with managers."""
    rng = random.Random("employees")
    out: list[dict[str, Any]] = []
    for n in range(430):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        department = DEPARTMENTS[min(int(rng.expovariate(0.45)), len(DEPARTMENTS) - 1)]
        managers = [e["id"] for e in out[:40] if e["department"] == department]
        out.append(
            {
                "id": f"emp_{1000 + n}",
                "first_name": first,
                "last_name": last,
                "work_email": _email(f"{first} {last}{n}", "ourco.example"),
                "job_title": rng.choice(["Engineer", "Manager", "Analyst", "Specialist", "Lead"]),
                "department": department,
                "manager_id": rng.choice(managers) if managers and n >= 7 else None,
                "location": rng.choice(CITIES)[0],
                "employment_type": rng.choice(["full_time", "full_time", "contractor"]),
                "start_date": (TODAY - dt.timedelta(days=rng.randint(30, 3000))).isoformat(),
                "status": "active",
            }
        )
    return out
