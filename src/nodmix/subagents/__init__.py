"""Subagents and agent-to-agent sessions: `sessions_spawn` and the other session tools, the
runs behind them, their limits, records and announcements (`service.Subagents`)."""
