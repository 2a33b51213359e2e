"""The Microsoft Teams channel (Bot Framework, Microsoft 365 Agents SDK)."""
