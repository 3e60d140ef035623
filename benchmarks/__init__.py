"""Benchmark and experiment scripts, each run from the repository root as
``python -m benchmarks.NAME``."""
