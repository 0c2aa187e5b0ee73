"""Known gap (xfail, strict): after a schedule timeout, a released member that was pinned to
its planned node but never bound blocks the group from forming again.

How it happens (placement ``pinned``): a member loses the gate with its required node
affinity narrowed to the planned node; before kube-scheduler binds it, the room is taken by
a pod cogate does not manage (kube-scheduler does not see cogate's reservations) or the node
goes away. The member is now Pending/Unschedulable and can never move: node affinity is
immutable once the gate is gone (KEP-3838 only allows narrowing while gated). When
``scheduleTimeoutSeconds`` passes, the opt-in ``--evict-on-timeout`` policy evicts only the
*bound* members with a controller owner. They come back gated, but the stuck member is
neither bound nor plannable, so the planner answers ``WaitingForMembers`` ("held by other
scheduling gates") for ever, unless someone deletes the stuck pod by hand.

Expected (what this test asks for): the timeout eviction also evicts unbound, ungated
members that carry cogate's pin and have a controller owner, so the owner recreates them
gated and the whole group is planned again. This changes the eviction rule written in
DESIGN.md §3 ("evicts the bound members that have a controller owner"), so it is left to
the owner of that rule.
"""

from __future__ import annotations

import jsonpatch
import pytest

from cogate.controller.reconciler import pin_ops

from .test_reconciler import Harness, raw_pg, raw_pod, verdict


@pytest.mark.xfail(strict=True, reason="timeout eviction skips unbound members stuck on their pin (DESIGN §3 rule); "
                                       "the group can never re-form -- reported to the lead")
def test_timeout_eviction_also_frees_members_stuck_on_their_pin():
    stuck = raw_pod("c", gates=(), owner=True)
    stuck = jsonpatch.apply_patch(stuck, pin_ops(stuck["spec"], "gone-node"))
    pods = [raw_pod("a", gates=(), node="n1", phase="Running", owner=True),
            raw_pod("b", gates=(), node="n1", phase="Running", owner=True), stuck]
    status = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}
    h = Harness(pods, [raw_pg(min_member=3, status=status, timeout=60)], [verdict("AlreadyReleased", fits=2)],
                evict=True)
    h.run()
    assert sorted(h.cluster.evicted) == ["a", "b", "c"]
