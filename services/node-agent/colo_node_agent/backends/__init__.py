"""Node backends: ``sim`` hosts many virtual nodes in one process; ``host`` (a real Linux node) comes later.

A backend owns the pods of its nodes and one cgroup tree + :class:`~colo_node_agent.cgroups.Executor` per node;
the service drives it with ``start_pod`` / ``evict_pod`` / ``set_slo`` / ``advance`` / ``node_metric``.
"""
