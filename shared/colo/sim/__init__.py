"""Simulation: a scenario from real traces, the virtual-time coordinator and the report (DESIGN.md §8)."""
