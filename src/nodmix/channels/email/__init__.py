"""The email channel: one mailbox (IMAP IDLE in, SMTP out); each sender is a DM."""
