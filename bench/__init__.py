"""Benchmarks that print each figure next to a baseline measured in the same process.

Run ``python -m bench [NAME ...] [--quick]``; see bench/README.md.
"""
