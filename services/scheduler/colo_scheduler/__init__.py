"""Colo scheduler: a columnar, vectorized scheduler with Kubernetes extension points (DESIGN.md §7)."""
