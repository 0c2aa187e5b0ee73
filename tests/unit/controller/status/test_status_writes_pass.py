"""Issue 40 through the reconciler: a released group's members binding and starting
(``scheduled``/``running`` rising) are written at most every ``PROGRESS_WRITE_SECONDS``, the pass
in between wakes up for the held write, and the phase (``Scheduled``, ``Running``) and a count
falling are written at once (``writes.write_due``; the rule itself: ``test_status_writes.py``)."""

from __future__ import annotations

import pytest

from cogate.controller.model.wakeups import WAKE_MARGIN
from cogate.controller.status.writes import PROGRESS_WRITE_SECONDS as N
from tests.builders import Harness, raw_pg, raw_pod, verdict

START = "2024-01-01T00:00:00Z"


def test_counts_after_the_release_are_held_then_brought_up_to_date():
    pods = [raw_pod(n, gates=()) for n in ("a", "b", "c", "d")]
    h = Harness(pods, [raw_pg(min_member=3, status={"phase": "Scheduling", "scheduleStartTime": START})],
                [verdict("AlreadyReleased", fits=4)])

    def status():
        return h.cluster.pgs["pg"]["status"]

    def writes():
        return len([e for e in h.cluster.log if e[0] == "status"])

    def member(name, node="", phase="Pending"):
        h.caches.members.apply_local(raw_pod(name, gates=(), node=node, phase=phase, rv=str(h.now)))

    h.run()  # the first write of this process: at once
    assert writes() == 1 and status()["phase"] == "Scheduling"
    released = next(c for c in status()["conditions"] if c["type"] == "Released")
    assert released["status"] == "True"

    member("a", "n1")
    h.run()
    assert writes() == 1 and not status().get("scheduled")  # 1 bound: held
    assert h.rec.debouncer.deadline() == pytest.approx(h.now + N + WAKE_MARGIN, abs=1e-6)  # a pass wakes for it
    h.now += N / 2
    member("b", "n2")
    h.run()
    assert writes() == 1  # 2 bound: still held, due N after the first held change
    h.now += N / 2
    h.run()  # the woken pass: the latest counts
    assert writes() == 2 and status()["scheduled"] == 2 and status()["phase"] == "Scheduling"

    h.now += 0.1
    member("c", "n3")
    h.run()  # minMember bound: the phase, at once, with the counts
    assert writes() == 3 and (status()["phase"], status()["scheduled"]) == ("Scheduled", 3)

    h.now += 0.1
    for name, node in (("a", "n1"), ("b", "n2"), ("c", "n3")):
        member(name, node, "Running")
    h.run()  # Running (3 running): the phase, at once
    assert writes() == 4 and (status()["phase"], status()["running"]) == ("Running", 3)

    h.now += 0.1
    member("d", "n1", "Running")
    h.run()  # a member beyond minMember binds and starts: counts only, held
    assert writes() == 4 and status()["running"] == 3
    h.now += N
    h.run()  # ... and written when due: the final counts of a Running group are never lost
    assert writes() == 5 and (status()["scheduled"], status()["running"]) == (4, 4)

    h.now += 0.1
    member("d", "n1", "Failed")
    h.run()  # a member ended: at once
    assert writes() == 6 and status()["failed"] == 1 and status()["running"] == 3
