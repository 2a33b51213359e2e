"""The state seam's old home: it is `nodmix.stores` now, at the bottom of the package tree, so
the stores of every layer open through it without importing the database backend's package.
New code imports `nodmix.stores`; this name stays until the last importer has moved."""

from __future__ import annotations

from nodmix.stores import Provider, bind, bound, provided, set_resolver, unbind

__all__ = ["Provider", "bind", "bound", "provided", "set_resolver", "unbind"]
