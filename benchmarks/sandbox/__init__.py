"""Sandbox benchmarks."""
