"""Test and demo support that ships with Nodmix.

- `nodmix.testing.model_server`: `ScriptedModelServer`, a real HTTP server speaking the
  OpenAI and Anthropic wire APIs, answered by a respond function; also runnable as
  `python -m nodmix.testing.model_server --script echo`.
- `nodmix.testing.scripts`: built-in respond functions (`echo`, `tool-then-answer`).
- `nodmix.testing.discord_server`: `ScriptedDiscord`, Discord's REST API and Gateway
  WebSocket for a real discord.py client; `nodmix.testing.slack_server`: `ScriptedSlack`,
  Slack's Web API and Socket Mode WebSocket for a real Bolt app;
  `nodmix.testing.mattermost_server`: `ScriptedMattermost`, Mattermost's REST API v4 and
  WebSocket for the real `mattermostautodriver` client and the channel's socket.

In-process scripted models live in `nodmix.providers.fake`. This package imports Starlette
and uvicorn, so nothing on Nodmix's start-up path may import it; nothing is imported here.
"""
