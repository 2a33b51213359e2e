"""Skills benchmarks: what listing skills costs in the system prompt, and what finding them costs
per turn.

Run from the repository root:

    python -m benchmarks.skills.bench_skills [--skills 200] [--prompt-skills 100] [--turns 300]

Skills are generated in a temporary workspace with descriptions of realistic, varied length
(40 to 300 characters, like published skills) and a mix of requirements, half of them on
programs (one missing, so gating has work to do). Timings go through the same call a turn
makes (`runtime.skills.turn_skills`: scan, gate, allowlist) plus the prompt section. Prints a
markdown table and writes `benchmarks/results/skills.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.report import cpu_calibration_ms
from nodmix.agents import resolve_agent
from nodmix.config import LoadedConfig
from nodmix.config.schema import NodmixConfig
from nodmix.context.tokens import CHARS_PER_TOKEN
from nodmix.runtime.skills import turn_skills
from nodmix.skills import SkillBook, skills_section

RESULTS = Path(__file__).resolve().parent.parent / "results" / "skills.json"

TARGET_PROMPT_TOKENS = 3000
TARGET_DISCOVERY_MS = 20.0

_VERBS = "Summarise Draft Check Convert Track Plan Review Search Clean Export Fetch Compare".split()
_OBJECTS = (
    "pull requests|invoices|meeting notes|CSV reports|calendar events|server logs|recipes|"
    "flight bookings|podcast feeds|expense receipts|Docker images|spreadsheets|RSS feeds"
).split("|")
_TAILS = (
    "using the command-line client and the workspace files",
    "and write a short Markdown summary the user can paste into chat",
    "when the user asks for a weekly overview, with links back to each source",
    "with web_fetch, keeping dates, amounts and names exactly as written in the source",
    "then file the result under memory/ so it can be found again later",
    "and flag anything that looks wrong or out of date before reporting back",
)


def _description(rng: random.Random) -> str:
    text = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    target = rng.choice([40, 60, 80, 100, 120, 160, 200, 300])
    while len(text) < target:
        text += " " + rng.choice(_TAILS)
    return text[:target].rstrip() + "."


def _write_skills(root: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for index in range(count):
        name = f"{rng.choice(_VERBS).lower()}-{rng.choice(_OBJECTS).split()[0].lower()}-{index}"
        requires = ""
        if index % 2 == 0:
            program = "nodmix-bench-missing" if index % 10 == 0 else rng.choice(["sh", "ls", "cat"])
            requires = f"metadata:\n  nodmix:\n    requires:\n      bins: [{program}]\n"
        folder = root / name
        folder.mkdir(parents=True)
        body = "\n".join(f"{n}. Step {n} of the procedure." for n in range(1, 40))
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {_description(rng)}\n{requires}---\n\n{body}\n",
            encoding="utf-8",
        )


def _backdate(root: Path) -> None:
    """Files older than the scanner's settle window, as on any machine not being edited."""
    stamp = time.time_ns() - 60 * 1_000_000_000
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(stamp, stamp))


def _setup(state: Path, count: int) -> tuple[SkillBook, LoadedConfig, Any]:
    config = NodmixConfig()
    agent = resolve_agent(config, "main", env={"NODMIX_STATE_DIR": str(state)})
    skills = agent.workspace / "skills"
    _write_skills(skills, count)
    _backdate(skills)
    empty = state / "no-bundled"
    empty.mkdir()
    loaded = LoadedConfig(config=config, path=state / "nodmix.json", exists=False, raw={})
    return SkillBook(state_dir=state, bundled_dir=empty), loaded, agent


def prompt_cost(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as temp:
        book, loaded, agent = _setup(Path(temp), count)
        offered = turn_skills(book, loaded, agent, {"PATH": os.environ.get("PATH", "")})
        section = offered.prompt(agent, code_mode=False) or ""
    tokens = -(-len(section) // CHARS_PER_TOKEN)
    return {
        "skills": count,
        "offered": len(offered.skills),
        "chars": len(section),
        "tokens": tokens,
        "tokensPerSkill": tokens / max(1, len(offered.skills)),
    }


def prompt_cost_all_offered(count: int) -> dict[str, Any]:
    """The same skills with every requirement met: the worst case for the prompt."""
    with tempfile.TemporaryDirectory() as temp:
        book, loaded, agent = _setup(Path(temp), count)
        env = {"PATH": os.environ.get("PATH", "")}
        review = book.review(
            loaded.config,
            raw_config={},
            config_dir=Path(temp),
            agent_id="main",
            workspace=agent.workspace,
            env=env,
        )
        skills = [s.skill for s in review.statuses]
        section = skills_section(skills, workspace=agent.workspace.absolute()) or ""
    tokens = -(-len(section) // CHARS_PER_TOKEN)
    return {"skills": len(skills), "chars": len(section), "tokens": tokens}


def discovery(count: int, turns: int) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "")}
    with tempfile.TemporaryDirectory() as temp:
        book, loaded, agent = _setup(Path(temp), count)
        start = time.perf_counter()
        turn_skills(book, loaded, agent, env).prompt(agent, code_mode=False)
        cold_ms = (time.perf_counter() - start) * 1000
        samples = []
        for _ in range(turns):
            start = time.perf_counter()
            turn_skills(book, loaded, agent, env).prompt(agent, code_mode=False)
            samples.append((time.perf_counter() - start) * 1000)
        # A new process: its scanner is empty, but the front matter is cached on disk.
        fresh = SkillBook(state_dir=book.state_dir, bundled_dir=book.bundled_dir)
        start = time.perf_counter()
        turn_skills(fresh, loaded, agent, env).prompt(agent, code_mode=False)
        cached_ms = (time.perf_counter() - start) * 1000
        changed = sorted((agent.workspace / "skills").iterdir())[3] / "SKILL.md"
        changed.write_text(changed.read_text(encoding="utf-8") + "\n", encoding="utf-8")
        start = time.perf_counter()
        offered = turn_skills(book, loaded, agent, env)
        offered.prompt(agent, code_mode=False)
        changed_ms = (time.perf_counter() - start) * 1000
    samples.sort()
    return {
        "skills": count,
        "offered": len(offered.skills),
        "coldMs": cold_ms,
        "newProcessCachedMs": cached_ms,
        "warmMedianMs": statistics.median(samples),
        "warmP99Ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "oneChangedMs": changed_ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skills", type=int, default=200)
    parser.add_argument("--prompt-skills", type=int, default=100)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    calibration = [cpu_calibration_ms()]
    cost = prompt_cost(args.prompt_skills)
    worst = prompt_cost_all_offered(args.prompt_skills)
    scan = discovery(args.skills, args.turns)
    calibration.append(cpu_calibration_ms())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "promptCost": cost,
                "promptCostAllOffered": worst,
                "discovery": scan,
                "calibrationMs": calibration,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    ok_prompt = worst["tokens"] <= TARGET_PROMPT_TOKENS
    ok_scan = scan["warmMedianMs"] <= TARGET_DISCOVERY_MS
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    print(
        f"| system-prompt section, {worst['skills']} skills all offered | {worst['tokens']:,} "
        f"tokens ({worst['chars']:,} chars at 4 per token, "
        f"{worst['tokens'] / worst['skills']:.1f} per skill) "
        f"| ≤ {TARGET_PROMPT_TOKENS:,} tokens | {'yes' if ok_prompt else 'no'} |"
    )
    print(
        f"| same {cost['skills']} skills after gating ({cost['offered']} offered) | "
        f"{cost['tokens']:,} tokens | - | - |"
    )
    print(
        f"| skill discovery per turn, {scan['skills']} skills, nothing changed (median) | "
        f"{scan['warmMedianMs']:.2f} ms (p99 {scan['warmP99Ms']:.2f}) "
        f"| ≤ {TARGET_DISCOVERY_MS:g} ms | {'yes' if ok_scan else 'no'} |"
    )
    print(f"| … one SKILL.md changed | {scan['oneChangedMs']:.2f} ms | - | - |")
    print(f"| … first scan (every SKILL.md parsed) | {scan['coldMs']:.1f} ms | - | - |")
    print(
        "| … first scan of a new process, front matter cached on disk | "
        f"{scan['newProcessCachedMs']:.1f} ms | - | - |"
    )
    print(
        "| CPU calibration before / after (quiet machine: ~120 ms) | "
        f"{calibration[0]:.0f} / {calibration[1]:.0f} ms | - | - |"
    )
    return 0 if ok_prompt and ok_scan else 1


if __name__ == "__main__":
    sys.exit(main())
