"""MCP benchmarks."""
