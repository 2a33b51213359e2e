"""Session and transcript benchmarks."""
