"""Plugins shipped with Nodmix as working examples (disabled until enabled in config)."""
