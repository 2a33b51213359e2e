"""The run-scoped tool catalog behind code mode: ids, lookup, safe names and search."""

from nodmix.catalog.catalog import (
    CONTROL_OWNER,
    CatalogEntry,
    CatalogLookupError,
    RunCatalog,
    collation_key,
)
from nodmix.catalog.search import SearchIndex, substring_rank, tokenize

__all__ = [
    "CONTROL_OWNER",
    "CatalogEntry",
    "CatalogLookupError",
    "RunCatalog",
    "SearchIndex",
    "collation_key",
    "substring_rank",
    "tokenize",
]
