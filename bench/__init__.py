"""Benchmark scripts (not tests): python bench/run_all.py; see docs/benchmarks.md."""
