"""Scheduling framework: extension-point protocols, plugin registry, the scheduling cycle and queue."""
