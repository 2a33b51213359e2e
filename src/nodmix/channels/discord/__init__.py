"""The Discord channel (discord.py)."""
