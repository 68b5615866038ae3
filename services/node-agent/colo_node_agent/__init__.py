"""Colo node agent: QoS strategies, the cgroup executor and the node backends (``sim``, later ``host``).

Layers (imports point downwards only)::

    service        NodeAgentService: bus/store wiring, ticks, NodeMetric/PodStatus/QoSEvent publishing
    metrics        Prometheus metrics from what the service publishes (docs/metrics.md "node-agent")
    backends/      sim (many virtual nodes in one process); host (a real Linux node, later)
    windows        report windows, averages and percentiles (REFERENCE.md §2)
    strategies/    pure functions: snapshot + policy -> plan (REFERENCE.md §5)
    cgroups/       logical cgroup resources, v1/v2 files, filesystem seam, executor
"""
