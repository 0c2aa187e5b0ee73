"""SIGTERM in the middle of a release (controller/main.py ``run``): the stopping leader sends no
more gate patches, its release is already recorded in the PodGroup's status, and the next leader
(a new process on the same cluster) releases the members left gated to the nodes of the same plan,
as one gang. End to end: tests/e2e/test_helm_install.py::test_leader_deleted_mid_release_another_replica_finishes_it."""

from __future__ import annotations

import pytest

from tests.builders import World, pinned, pod, raw_pg, ready_node


@pytest.mark.parametrize("sent_before_stop", [0, 1, 3])
def test_a_release_cut_by_shutdown_is_recorded_and_finished_by_the_next_leader(sent_before_stop):
    nodes = [ready_node(n, "4") for n in ("n1", "n2")]
    pods = [pod(f"g-{i}").req(cpu="2").group("pg").gated().raw() for i in range(4)]
    w = World(pods, [raw_pg("pg", 4)], nodes=nodes, preemption=False, workers=1)  # patches one at a time: exact counts
    writer = w.rec.writer
    sent = []
    real = writer.ungate

    def ungate(namespace, name, uid, node, *a, **kw):
        if not kw.get("dry_run") and len(sent) == sent_before_stop:
            w.rec.stop_releasing()  # SIGTERM arrives while the gate patches go out
        out = real(namespace, name, uid, node, *a, **kw)
        if out == "removed":
            sent.append(name)
        return out

    writer.ungate = ungate
    w.run()
    assert len(sent) == sent_before_stop
    st = w.cluster.pgs["pg"]["status"]
    assert st.get("scheduleStartTime") and st["phase"] in ("Scheduling", "Scheduled"), st  # recorded first
    left = [p for p in w.cluster.pods if w.gated(p)]
    assert len(left) == 4 - sent_before_stop
    assert w.metric("cogate_controller_gate_removals_total", result="stopped") == 4 - sent_before_stop
    # the stopping leader never sends another gate patch, whatever its next pass decides
    assert [c for c in w.cluster.log if c[0] == "pod"] == [("pod", n) for n in sent]
    calls = len(w.cluster.log)
    w.run(1.0)
    assert [p for p in w.cluster.pods if w.gated(p)] == left
    assert not [c for c in w.cluster.log[calls:] if c[0] == "pod"]

    new = w.restarted()
    new.run(1.0)
    assert not [p for p in new.cluster.pods if new.gated(p)], "the next leader finishes the release"
    placed = {p: pinned(new.cluster.pods[p]) for p in new.cluster.pods}
    assert sorted(placed.values()) == ["n1", "n1", "n2", "n2"], placed  # 2 x 2 CPU per 4-CPU node: one plan
    assert new.cluster.pgs["pg"]["status"]["scheduleStartTime"] == st["scheduleStartTime"]  # the same release
