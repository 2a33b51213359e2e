"""Matrix, on matrix-nio's `AsyncClient` (long-polling `/sync`).

Its objects stay in this package."""
