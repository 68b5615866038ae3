"""Colo slo-manager: colocation admission, batch/mid allocatable per node, NodeSLO per node.

See docs/slo-manager.md. Entry point: ``python -m colo_slo_manager``.
"""
