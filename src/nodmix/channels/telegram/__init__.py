"""Telegram, on python-telegram-bot's `Bot` (long polling). Its objects stay in this package."""
