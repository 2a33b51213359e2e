"""WhatsApp through the WhatsApp Business Cloud API (pywa's async client, signed webhooks)."""
