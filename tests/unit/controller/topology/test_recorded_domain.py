"""The chosen domain recorded on the PodGroup (issue 32 item 3): the rule
(:func:`cogate.controller.topology.constraints.recorded_domain`) and the reconciler writing it
(:class:`cogate.controller.releasing.Releasing`) before the gates go, cleared once the release no
longer stands."""

from __future__ import annotations

import dataclasses

import pytest

from cogate.controller.topology import constraints as t
from tests.builders import Harness, podgroup, raw_pod, verdict

RACK = "example.com/rack"
R3 = ((RACK, "r3"),)


@pytest.mark.parametrize(("current", "domain", "stands", "fresh", "constrained", "wanted"), [
    (None, R3, True, True, True, f"{RACK}=r3"),                    # released now: written
    (f"{RACK}=r1", R3, True, True, True, f"{RACK}=r3"),            # re-placed whole elsewhere: replaced
    (f"{RACK}=r3", R3, True, False, True, f"{RACK}=r3"),           # already released, home known: kept
    (f"{RACK}=r3", (), True, False, True, f"{RACK}=r3"),           # already released, home unknown now: kept
    (f"{RACK}=r3", (), True, True, True, None),                    # released now in no one domain: none
    (f"{RACK}=r3", R3, False, False, True, None),                  # release lost (waiting): cleared
    (f"{RACK}=r3", R3, True, True, False, None),                   # no constraint asked: none
    (None, (("zone", "a"), (RACK, "r3")), True, True, True, f"zone=a,{RACK}=r3"),  # the members' format
])
def test_recorded_domain(current, domain, stands, fresh, constrained, wanted):
    assert t.recorded_domain(current, domain, stands=stands, fresh=fresh, constrained=constrained) == wanted


def _pg(annotations=None):
    return podgroup("pg").min_member(2).annotations({t.REQUIRED: RACK, t.LEVELS: RACK, **(annotations or {})}).raw()


def test_release_writes_the_domain_on_the_pod_group_before_the_gates():
    released = dataclasses.replace(verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2, "fits 2 of 2"), domain=R3)
    h = Harness([raw_pod("a"), raw_pod("b")], [_pg()], [released])
    h.run()
    assert h.cluster.pgs["pg"]["metadata"]["annotations"][t.DOMAIN_ANNOTATION] == f"{RACK}=r3"
    log = [e for e in h.cluster.log if e[0] != "dry-run"]
    assert log.index(("status", "pg")) < log.index(("annotate", "pg")) < log.index(("pod", "a"))
    for p in ("a", "b"):  # the same format as on the members
        assert h.cluster.pods[p]["metadata"]["annotations"][t.DOMAIN_ANNOTATION] == f"{RACK}=r3"


def test_the_domain_is_cleared_when_the_release_no_longer_stands_and_not_rewritten_when_unchanged():
    h = Harness([raw_pod("a"), raw_pod("b")], [_pg({t.DOMAIN_ANNOTATION: f"{RACK}=r3"})],
                [verdict("InsufficientCapacity", {}, 1, "fits 1 of 2")])
    h.run()
    assert t.DOMAIN_ANNOTATION not in h.cluster.pgs["pg"]["metadata"]["annotations"]
    assert t.REQUIRED in h.cluster.pgs["pg"]["metadata"]["annotations"]
    h.run()
    assert [e for e in h.cluster.log if e[0] == "annotate"] == [("annotate", "pg")]


def test_a_group_without_topology_gets_no_annotation_write():
    h = Harness([raw_pod("a"), raw_pod("b")], [podgroup("pg").min_member(2).raw()],
                [verdict("Released", {"uid-a": "n1", "uid-b": "n1"}, 2, "fits 2 of 2")])
    h.run()
    assert ("annotate", "pg") not in h.cluster.log
