"""``cogate demo`` judges what it saw against the README's promise (localcluster/demojudge.py)."""

from __future__ import annotations

import itertools

import pytest

from cogate.api import DEFAULT_GATE_NAME
from cogate.localcluster import demojudge as dj


def pod(name: str, *, node: str | None = None, phase: str = "Pending", gated: bool = False,
        deleting: bool = False) -> dict:
    meta = {"name": name, **({"deletionTimestamp": "2026-12-06T00:00:00Z"} if deleting else {})}
    spec = {**({"nodeName": node} if node else {}),
            **({"schedulingGates": [{"name": DEFAULT_GATE_NAME}]} if gated else {})}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def group(phase: str, *conditions: tuple[str, str, str, str]) -> dict:
    return {"status": {"phase": phase, "conditions": [
        {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}}


RUNNING = [pod(f"nginx-r{i}", node="node-0", phase="Running") for i in range(3)]
GATED = [pod(f"nginx-g{i}", gated=True) for i in range(3)]
WAITING = ("MembersWaiting", "True", "WaitingForCapacity",
           "3 members (nginx-g0, nginx-g1, nginx-g2) wait gated for capacity: cpu short by 8000m")
SHORT = ("Scheduled", "False", "InsufficientCapacity", "fits 3 of 4: cpu short by 2000m")


def test_pod_states():
    assert dj.pod_state(pod("a", node="n", phase="Running")) == dj.RUNNING
    assert dj.pod_state(pod("a", node="n", phase="Pending")) == dj.OTHER
    assert dj.pod_state(pod("a", gated=True)) == dj.GATED
    assert dj.pod_state(pod("a")) == dj.PENDING
    assert dj.pod_state(pod("a", node="n", phase="Running", deleting=True)) == dj.OTHER
    other_gate = pod("a")
    other_gate["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    assert dj.pod_state(other_gate) == dj.PENDING


def test_min_member_3_as_promised():
    v = dj.judge(3, dj.observe(RUNNING + GATED, group("Running", WAITING)))
    assert v.ok, v.lines
    assert v.lines[0] == ("seen: 3 Running (nginx-r0, nginx-r1, nginx-r2), 3 gated (nginx-g0, nginx-g1, nginx-g2); "
                          "PodGroup phase Running")
    assert not any("NOT AS PROMISED" in line for line in v.lines)


def test_min_member_4_as_promised():
    v = dj.judge(4, dj.observe([pod(f"p{i}", gated=True) for i in range(6)], group("Pending", SHORT)))
    assert v.ok, v.lines
    assert v.lines[1] == "InsufficientCapacity: False InsufficientCapacity: fits 3 of 4: cpu short by 2000m"


@pytest.mark.parametrize("case, pods, pg, fault", [
    (3, RUNNING[:2] + GATED + [pod("x", gated=True)], group("Running", WAITING), "expected 3 Running and 3 gated"),
    (3, RUNNING + GATED[:2] + [pod("x")], group("Running", WAITING), "sent to kube-scheduler without the gate: x"),
    (3, RUNNING + GATED, group("Scheduled", WAITING), "expected PodGroup phase Running, saw Scheduled"),
    (3, RUNNING + GATED, group("Running"), "expected condition MembersWaiting=True WaitingForCapacity"),
    (3, RUNNING + GATED, group("Running", WAITING[:3] + ("3 members (nginx-g0, nginx-g1 and 1 more) wait",)),
     "MembersWaiting does not name every gated member"),
    (3, RUNNING + GATED[:2], group("Running", WAITING), "expected 6 pods, saw 5"),
    (3, RUNNING + GATED, None, "expected PodGroup phase Running, saw none"),
    (4, RUNNING[:1] + [pod(f"p{i}", gated=True) for i in range(5)], group("Pending", SHORT),
     "expected all 6 gated and none bound"),
    (4, [pod(f"p{i}", gated=True) for i in range(6)], group("Scheduling", SHORT),
     "expected PodGroup phase Pending, saw Scheduling"),
    (4, [pod(f"p{i}", gated=True) for i in range(6)], group("Pending", SHORT[:3] + ("fits 2 of 4",)),
     "saying 'fits 3 of 4'"),
    (4, [pod(f"p{i}", gated=True) for i in range(6)], group("Pending"), "saying 'fits 3 of 4'"),
])
def test_every_difference_is_named(case, pods, pg, fault):
    v = dj.judge(case, dj.observe(pods, pg))
    assert not v.ok
    assert any(line.startswith("NOT AS PROMISED") and fault in line for line in v.lines), v.lines


def test_only_the_promised_split_passes():
    """Over every split of 6 pods into Running / gated / Pending without the gate, with the right
    status, exactly the promised one passes for each minMember."""
    for running, gated in itertools.product(range(7), repeat=2):
        if running + gated > 6:
            continue
        pods = ([pod(f"r{i}", node="n", phase="Running") for i in range(running)]
                + [pod(f"g{i}", gated=True) for i in range(gated)]
                + [pod(f"u{i}") for i in range(6 - running - gated)])
        waiting = WAITING[:3] + (f"members ({', '.join(f'g{i}' for i in range(gated))}) wait",)
        assert dj.judge(3, dj.observe(pods, group("Running", waiting))).ok == (running == 3 and gated == 3)
        assert dj.judge(4, dj.observe(pods, group("Pending", SHORT))).ok == (gated == 6)
