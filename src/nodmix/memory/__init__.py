"""Searchable memory: `MEMORY.md`, `memory/**/*.md` and, optionally, past sessions.

- `chunking`: Markdown split by headings and paragraphs, with overlap and line ranges;
- `store`: the SQLite index under the state dir (files, chunks, FTS5, cached embeddings);
- `sources`: which files are memory, and session transcripts rendered as text;
- `embeddings`: an OpenAI-compatible `/v1/embeddings` client (optional);
- `index`: `MemoryIndex`, incremental re-index by mtime/size then content hash, and search;
- `ranking`: keyword (BM25) and vector scores merged into one ranking;
- `tools`: the `memory_search` and `memory_get` tools;
- `service`: one index per agent for a running Nodmix, kept fresh after tool writes.
"""
