"""Scheduled and triggered turns: cron jobs (`jobs.py`, `schedule.py`, `store.py`,
`scheduler.py`), their runs (`runner.py`, `history.py`), the heartbeat (`heartbeat.py`),
webhook templates (`templates.py`) and the agent's `cron` tool (`tool.py`).
`service.Automation` ties them to a runtime; the gateway runs its loops."""
