"""ClusterState.forget_finished looks only at finished pods; it must forget exactly what a full scan would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from colo.messages import PodBound, PodSpec, PodStatus, Resources
from colo_slo_manager.state import ClusterState

UIDS = [f"p{i}" for i in range(6)]
NODES = ["n1", "n2"]

_event = st.one_of(
    st.builds(lambda uid, node, at: PodBound(spec=PodSpec(uid=uid, name=uid, priority=9500,
                                                          requests=Resources(cpu=1000)), node=node, at=at),
              st.sampled_from(UIDS), st.sampled_from(NODES), st.integers(0, 5000).map(float)),
    st.builds(lambda uid, node, phase, at: PodStatus(uid=uid, node=node, phase=phase, at=at),
              st.sampled_from(UIDS), st.sampled_from(NODES),
              st.sampled_from(["Running", "Succeeded", "Failed"]), st.integers(0, 5000).map(float)),
)


def _full_scan(state: ClusterState, now: float, retention_s: float) -> set[str]:
    return {uid for uid, e in state.pods.items() if not e.view.active and now - e.updated_at > retention_s}


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.tuples(_event, st.booleans()), max_size=30), retention_s=st.sampled_from([0.0, 600.0]))
def test_forgets_what_a_full_scan_finds(events: list[tuple[PodBound | PodStatus, bool]], retention_s: float) -> None:
    state = ClusterState()
    now = 0.0
    for event, sweep in events:
        if isinstance(event, PodBound):
            state.on_bound(event)
        else:
            state.on_status(event)
        now = max(now, event.at)
        if sweep:
            want = _full_scan(state, now + 1000.0, retention_s)
            before = set(state.pods)
            assert state.forget_finished(now + 1000.0, retention_s) == len(want)
            assert before - set(state.pods) == want
            assert _full_scan(state, now + 1000.0, retention_s) == set()
    for node in NODES:
        assert state.pod_summary(node).known == {uid for uid, e in state.pods.items() if e.node == node}
