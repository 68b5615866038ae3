"""What a gang member's record and the cycle's outcome say once it stops waiting at Permit: a Strict gang sent
back and a NonStrict gang's timeout give every member its reason (the decision record no longer says Wait, and
the failure is reported so that a PodUnschedulable is published), and a dry run of one member says what it is."""

from __future__ import annotations

from gang_helpers import add_members, allocated_cpu, cluster, gang, member


def test_a_strict_gang_sent_back_gives_every_member_its_reason() -> None:
    s = cluster(1, cpu=5000)
    uids = add_members(s, gang("g", 8, "Strict"), 8, 1.0)
    out = s.schedule_cycle(2.0)
    assert not out.placements and allocated_cpu(s) == 0 and not s.waiting
    failed = {f.pod.uid: f.result.message for f in out.failures}
    assert set(failed) == set(uids)
    sent_back = "gang default/g: member g-0005 fits no node; the gang was sent back"
    assert all(sent_back in failed[u] for u in uids[:5])  # the five that held room while waiting
    for uid in uids:
        rec = s.decision(uid)
        assert rec is not None and rec.status == "Unschedulable" and rec.node == -1, (uid, rec)
        assert "waiting for gang" not in rec.message


def test_a_nonstrict_timeout_says_so_on_every_member_it_released() -> None:
    s = cluster(1, cpu=3000)
    uids = add_members(s, gang("g", 4, "NonStrict", timeout_s=120.0), 4, 0.0)
    s.schedule_cycle(10.0)
    assert len(s.waiting) == 3
    out = s.schedule_cycle(130.0)
    assert not s.waiting and allocated_cpu(s) == 0
    released = {f.pod.uid: f.result.message for f in out.failures if f.pod.uid in uids[:3]}
    assert released == {u: "gang default/g wait timed out after 120 s" for u in uids[:3]}
    for uid in uids[:3]:
        rec = s.decision(uid)
        assert rec is not None and (rec.status, rec.message) == ("Unschedulable",
                                                                 "gang default/g wait timed out after 120 s")


def test_a_dry_run_of_one_member_does_not_claim_the_gang_is_complete_and_short() -> None:
    s = cluster(1, cpu=3000)
    uids = add_members(s, gang("g", 4, "NonStrict", timeout_s=120.0), 4, 0.0)
    s.schedule_cycle(10.0)
    s.schedule_cycle(130.0)  # timed out: all four parked again
    s.add_pod(member("other", None), 131.0)
    s.schedule_cycle(131.0)  # a cycle without the gang in its batch
    rec = s.explain(uids[0], 132.0)
    assert rec is not None and rec.status == "Unschedulable"
    assert "has 4 of 4 members" not in rec.message
    assert "0 of 4 members placed, 4 known; a dry run tries one member alone" in rec.message


def test_every_waiting_member_shows_the_gangs_current_count() -> None:
    """The first member to wait does not keep saying "1 of 8" once more members are placed."""
    s = cluster(1, cpu=3000)
    uids = add_members(s, gang("g", 4, "NonStrict"), 4, 0.0)
    s.schedule_cycle(10.0)
    assert len(s.waiting) == 3
    for uid in s.waiting:
        rec = s.decision(uid)
        assert rec is not None and rec.message == "Coscheduling: waiting for gang default/g: 3 of 4 placed", (uid, rec.message)
    assert uids
