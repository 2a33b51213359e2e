"""Configuration: the `nodmix.json` schema, loading, validation and editing."""

from nodmix.config.loader import LoadedConfig, load_config, parse_document, resolve_secret, validate
from nodmix.config.schema import NodmixConfig

__all__ = [
    "LoadedConfig",
    "NodmixConfig",
    "load_config",
    "parse_document",
    "resolve_secret",
    "validate",
]
