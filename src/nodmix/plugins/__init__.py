"""Plugins: discovery through entry points and paths, and typed registries of what they add."""

from nodmix.plugins.api import Plugin, PluginAPI
from nodmix.plugins.loader import ENTRY_POINT_GROUP, discover, load_plugins
from nodmix.plugins.registry import PluginRegistry, PluginStatus

__all__ = [
    "ENTRY_POINT_GROUP",
    "Plugin",
    "PluginAPI",
    "PluginRegistry",
    "PluginStatus",
    "discover",
    "load_plugins",
]
