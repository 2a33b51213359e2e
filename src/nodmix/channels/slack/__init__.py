"""The Slack channel (slack-bolt on slack_sdk)."""
