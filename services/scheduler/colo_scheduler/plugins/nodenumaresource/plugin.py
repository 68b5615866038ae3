"""NodeNUMAResource: exclusive cpusets for LSE/LSR pods chosen at Reserve, NUMA topology policy as a Filter,
NUMA fit as a Score (Koordinator ``pkg/scheduler/plugins/nodenumaresource``; docs/topology.md).

* PreFilter: a pod whose ``scheduling.koordinator.sh/resource-spec`` is malformed is refused (every problem
  listed); other pods pass.
* Filter: for an LSE/LSR pod with whole cores (:func:`~.knobs.cpu_request`) on a node with a known topology:
  rejected when the node's bind policy conflicts with the pod's required one, the NUMA topology policy finds no
  NUMA nodes (:func:`~.hints.numa_choice`), or the accumulator finds no CPUs (:func:`~.accumulator.take_cpus`).
  Other pods and nodes without a topology pass (``filter`` returns None for other pods).
* Score: 100 × (the fewest NUMA nodes the request could span by their sizes) / (the fewest it can span now);
  0 where it cannot be placed, and for every node when the pod wants no cpuset.
* Reserve: books the chosen CPUs on the node and puts them on the pod (:data:`ASSIGNED_CPUSET`); a pod that
  arrives with a cpuset (adopted from the store) books exactly that. Unreserve frees them.
"""

from __future__ import annotations

import logging

import msgspec
import numpy as np

from colo.messages import NodeSpec, cpuset_format, cpuset_parse
from colo_scheduler.framework.interface import (
    NODE_ADD,
    POD_DELETE,
    UNSCHEDULABLE_AND_UNRESOLVABLE,
    CycleState,
    IntpArray,
    Status,
)
from colo_scheduler.plugins.nodenumaresource.accumulator import (
    BindPolicy,
    CPUDetails,
    NUMAStrategy,
    eligible,
    take_cpus,
)
from colo_scheduler.plugins.nodenumaresource.hints import (
    NUMATopologyPolicy,
    min_width,
    narrowest,
    numa_choice,
    usable_per_numa,
)
from colo_scheduler.plugins.nodenumaresource.knobs import (
    CPURequest,
    NodeKnobs,
    cpu_request,
    node_knobs,
    resolve_bind,
)
from colo_scheduler.plugins.nodenumaresource.state import NodeCPUs
from colo_scheduler.podinfo import ASSIGNED_CPUSET, IntArray, PodInfo
from colo_scheduler.table import BoolArray, NodeTable

log = logging.getLogger("colo.scheduler")

_REQUEST = "numa.request"
"""``PodInfo.extra`` key of the pod's parsed :class:`CPURequest` (or None), computed once per PodInfo."""


class NodeNUMAResourceArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arguments of NodeNUMAResource (Koordinator ``NodeNUMAResourceArgs``): ``default_cpu_bind_policy`` for
    pods that name none (Koordinator's default FullPCPUs), ``numa_allocate_strategy`` (MostAllocated: fill the
    fullest NUMA node that holds the request first, Koordinator's default), ``default_numa_topology_policy`` for
    nodes without the ``node.koordinator.sh/numa-topology-policy`` label (None)."""

    default_cpu_bind_policy: BindPolicy = "FullPCPUs"
    numa_allocate_strategy: NUMAStrategy = "MostAllocated"
    default_numa_topology_policy: NUMATopologyPolicy = "None"


class NodeNUMAResource:
    """The plugin (module doc). State: per node name its :class:`NodeCPUs`; per node spec its details and
    knobs (rebuilt when the spec object changes)."""

    name = "NodeNUMAResource"
    events = frozenset({NODE_ADD, POD_DELETE})
    settled_none = True  # filter() is None for a pod without a cpuset wish at every table state
    app_blind = True

    MEMO_SIZE = 65_536
    """Answers (filter and score) kept at most before the memo is cleared."""

    def __init__(self, args: NodeNUMAResourceArgs | None = None) -> None:
        self.args = args or NodeNUMAResourceArgs()
        self.nodes: dict[str, NodeCPUs] = {}
        self._specs: dict[str, tuple[NodeSpec, CPUDetails | None, NodeKnobs, bytes]] = {}
        self._details: dict[bytes, CPUDetails] = {}
        # nodes of one topology with no CPUs held give the same answer: one computation for all of them
        self._memo: dict[tuple[object, ...], tuple[tuple[int, ...] | None, str] | int] = {}

    # ------------------------------------------------------------------ pod and node facts

    def request(self, pod: PodInfo) -> tuple[CPURequest | None, list[str]]:
        """The pod's cpuset wish and the problems of its annotation (cached on the PodInfo)."""
        got = pod.extra.get(_REQUEST)
        if got is None:
            got = pod.extra[_REQUEST] = cpu_request(pod.spec)
        return got  # type: ignore[return-value]

    def node(self, table: NodeTable, i: int) -> tuple[CPUDetails | None, NodeKnobs]:
        """Details (None without a topology) and knobs of row ``i``."""
        cached = self._spec(table, i)
        return cached[1], cached[2]

    def _spec(self, table: NodeTable, i: int) -> tuple[NodeSpec, CPUDetails | None, NodeKnobs, bytes]:
        spec = table.specs[i]
        cached = self._specs.get(spec.name)
        if cached is None or cached[0] is not spec:
            key = msgspec.msgpack.encode(spec.topology)
            details = self._details.get(key)
            if details is None and spec.topology.cpus:
                details = self._details[key] = CPUDetails.of(spec.topology)
            knobs = node_knobs(spec, self.args.default_numa_topology_policy)
            for p in knobs.problems:
                log.warning("node %s: %s (ignored)", spec.name, p)
            cached = self._specs[spec.name] = (spec, details, knobs, key)
        return cached

    def _memo_key(self, table: NodeTable, i: int, what: str, req: CPURequest) -> tuple[object, ...]:
        """The memo key of an answer about row ``i``: the topology, knobs and request when the node holds
        no CPUs (shared by every such node), else the node and its allocation version."""
        spec, _, knobs, topo = self._spec(table, i)
        held = self.nodes.get(spec.name)
        if held is None or not held.pods:
            return what, topo, knobs, req
        return what, spec.name, held.version, knobs, req

    def _remember(self, key: tuple[object, ...], value: tuple[tuple[int, ...] | None, str] | int) -> None:
        if len(self._memo) >= self.MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = value

    def free_cpus(self, table: NodeTable, i: int) -> tuple[set[int], NodeCPUs]:
        """Unallocated, unreserved CPUs of row ``i`` and its allocations."""
        details, knobs = self.node(table, i)
        held = self.nodes.get(table.names[i]) or NodeCPUs()
        cpus = set(details.numa_of) if details else set()
        return cpus - held.held.keys() - knobs.reserved, held

    def choose(self, table: NodeTable, i: int, req: CPURequest) -> tuple[tuple[int, ...] | None, str]:
        """(CPUs for ``req`` on row ``i``, "") or (None, why not); ((), "") on a node without a topology."""
        key = self._memo_key(table, i, "choose", req)
        got = self._memo.get(key)
        if got is None:
            got = self.choose_fresh(table, i, req)
            self._remember(key, got)
        return got  # type: ignore[return-value]

    def choose_fresh(self, table: NodeTable, i: int, req: CPURequest) -> tuple[tuple[int, ...] | None, str]:
        """:meth:`choose` computed anew, without the memo (the per-node loop oracle compares the two)."""
        details, knobs = self.node(table, i)
        if details is None:
            return (), ""
        bind, why = resolve_bind(req, knobs, self.args.default_cpu_bind_policy)
        if bind is None:
            return None, why
        free, held = self.free_cpus(table, i)
        cpus = eligible(details, free, held.held, req.exclusive)
        numa, why = numa_choice(details, cpus, req.n, bind, knobs.policy, self.args.numa_allocate_strategy)
        if why:
            return None, why
        got = take_cpus(details, cpus, held.held, req.n, bind, req.exclusive, self.args.numa_allocate_strategy, numa)
        if got is None:
            if bind == "FullPCPUs" and req.n % details.threads_per_core:
                return None, f"SMT alignment: FullPCPUs needs a multiple of {details.threads_per_core} CPUs"
            return None, f"not enough free CPUs for a {req.n}-CPU cpuset ({bind}, exclusive {req.exclusive})"
        return got, ""

    # ------------------------------------------------------------------ extension points

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """Refuse a pod whose resource-spec annotation is malformed (every problem listed)."""
        _, problems = self.request(pod)
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, "; ".join(problems)) if problems else None

    def filter(self, state: CycleState, pod: PodInfo) -> BoolArray | None:
        """(n,) True where the pod's cpuset can be found; None for a pod without a cpuset wish."""
        req, _ = self.request(pod)
        if req is None:
            return None
        table = state.table
        return np.fromiter((self.choose(table, i, req)[0] is not None for i in range(table.n)), np.bool_, table.n)

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> BoolArray:
        """(len(rows),) the filter on ``rows``."""
        req, _ = self.request(pod)
        if req is None:
            return np.ones(len(rows), np.bool_)
        return np.fromiter((self.choose(state.table, int(i), req)[0] is not None for i in rows), np.bool_, len(rows))

    def filter_node(self, state: CycleState, pod: PodInfo, i: int) -> bool:
        """The filter on row ``i``."""
        req, _ = self.request(pod)
        return req is None or self.choose(state.table, i, req)[0] is not None

    def explain(self, state: CycleState, pod: PodInfo, rejected: BoolArray) -> dict[str, int]:
        """Reason → number of ``rejected`` nodes this plugin rejects for it."""
        req, _ = self.request(pod)
        out: dict[str, int] = {}
        if req is None:
            return out
        for i in np.flatnonzero(rejected):
            got, why = self.choose(state.table, int(i), req)
            if got is None:
                out[why] = out.get(why, 0) + 1
        return out

    def score_node(self, state: CycleState, pod: PodInfo, i: int) -> int:
        """Raw score of row ``i`` (module doc)."""
        req, _ = self.request(pod)
        if req is None:
            return 0
        key = self._memo_key(state.table, i, "score", req)
        got = self._memo.get(key)
        if got is None:
            got = self.score_fresh(state.table, i, req)
            self._remember(key, got)
        return got  # type: ignore[return-value]

    def score_fresh(self, table: NodeTable, i: int, req: CPURequest) -> int:
        """:meth:`score_node`'s raw score of row ``i`` computed anew, without the memo."""
        details, knobs = self.node(table, i)
        if details is None:
            return 0
        bind, _ = resolve_bind(req, knobs, self.args.default_cpu_bind_policy)
        free, held = self.free_cpus(table, i)
        usable = usable_per_numa(details, eligible(details, free, held.held, req.exclusive), bind or "FullPCPUs")
        got = narrowest(usable, req.n, self.args.numa_allocate_strategy)
        return 0 if got is None else 100 * min_width(details, req.n) // max(len(got), 1)

    def score(self, state: CycleState, pod: PodInfo) -> IntArray:
        """(n,) raw scores in 0..100."""
        return self.score_rows(state, pod, np.arange(state.table.n, dtype=np.intp))

    def score_rows(self, state: CycleState, pod: PodInfo, rows: IntpArray) -> IntArray:
        """(len(rows),) raw scores."""
        req, _ = self.request(pod)
        if req is None:
            return np.zeros(len(rows), np.int64)
        return np.fromiter((self.score_node(state, pod, int(i)) for i in rows), np.int64, len(rows))

    def reserve(self, table: NodeTable, pod: PodInfo, node: int, now: float) -> None:
        """Book the pod's CPUs on row ``node`` (a carried-in cpuset as it is, else :meth:`choose`)."""
        req, _ = self.request(pod)
        if req is None:
            return
        carried = pod.extra.get(ASSIGNED_CPUSET)
        if isinstance(carried, str) and carried:
            cpus = cpuset_parse(carried)
        else:
            got, why = self.choose(table, node, req)
            if not got:  # no topology, or the state moved since the filter: the pod runs in the shared pool
                if got is None:
                    log.warning("pod %s on %s gets no cpuset: %s", pod.uid, table.names[node], why)
                return
            cpus = got
        clash = self.nodes.setdefault(table.names[node], NodeCPUs()).add(pod.uid, cpus, req.exclusive)
        if clash:
            log.error("pod %s on %s: CPUs %s are held by another pod too", pod.uid, table.names[node], clash)
        pod.extra[ASSIGNED_CPUSET] = cpuset_format(cpus)
        table.touch(node)

    def unreserve(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """Free the pod's CPUs on row ``node``."""
        pod.extra.pop(ASSIGNED_CPUSET, None)
        held = self.nodes.get(table.names[node])
        if held is not None and held.remove(pod.uid):
            table.touch(node)
