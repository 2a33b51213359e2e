"""The XMPP channel."""
