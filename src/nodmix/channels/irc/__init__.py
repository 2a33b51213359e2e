"""The IRC channel (pydle): private messages are DMs, channels are groups."""
