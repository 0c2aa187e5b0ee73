"""Topology levels and constraints from annotations (issue 32 item 1): controller/topology/constraints.py."""

from __future__ import annotations

import pytest

from cogate.controller.topology import constraints as t
from cogate.controller.topology.constraints import Constraint, TopologyError, parse

HOST = t.HOSTNAME_LABEL
BLOCK, RACK, ZONE = "example.com/block", "example.com/rack", "topology.kubernetes.io/zone"
LEVELS = (BLOCK, RACK)


def test_no_annotation_no_constraint():
    assert parse({}, [{}], LEVELS) is None
    assert parse({"other": "x"}, [], LEVELS) is None
    # the levels override alone asks nothing
    assert parse({t.LEVELS: "a,b"}, [], LEVELS) is None


@pytest.mark.parametrize("annotations, expected", [
    ({t.REQUIRED: RACK}, Constraint((BLOCK, RACK, HOST), required=1)),
    ({t.REQUIRED: BLOCK, t.PREFERRED: RACK}, Constraint((BLOCK, RACK, HOST), required=0, preferred=1)),
    ({t.PREFERRED: HOST}, Constraint((BLOCK, RACK, HOST), preferred=2)),
    ({t.REQUIRED: BLOCK, t.SLICE_SIZE: "4", t.SLICE_LEVEL: RACK},
     Constraint((BLOCK, RACK, HOST), required=0, slice_size=4, slice_level=1)),
    ({t.REQUIRED: RACK, t.BALANCED: "true", t.EXCLUSIVE: "True"},
     Constraint((BLOCK, RACK, HOST), required=1, balanced=True, exclusive=True)),
    # a label outside the configured levels: the label alone
    ({t.REQUIRED: ZONE}, Constraint((ZONE, HOST), required=0)),
    # the PodGroup's own levels win
    ({t.LEVELS: f"{ZONE}, {RACK}", t.REQUIRED: RACK}, Constraint((ZONE, RACK, HOST), required=1)),
])
def test_cogate_annotations(annotations, expected):
    assert parse(annotations, [], LEVELS) == expected


@pytest.mark.parametrize("annotations, named", [
    ({t.REQUIRED: "bad label!"}, t.REQUIRED),
    ({t.REQUIRED: RACK, t.PREFERRED: BLOCK}, t.PREFERRED),  # preferred coarser than required
    ({t.REQUIRED: RACK, t.SLICE_SIZE: "2", t.SLICE_LEVEL: BLOCK}, t.SLICE_LEVEL),
    ({t.REQUIRED: RACK, t.SLICE_SIZE: "0", t.SLICE_LEVEL: RACK}, t.SLICE_SIZE),
    ({t.REQUIRED: RACK, t.SLICE_SIZE: "x", t.SLICE_LEVEL: RACK}, t.SLICE_SIZE),
    ({t.REQUIRED: RACK, t.SLICE_SIZE: "2"}, t.SLICE_SIZE),
    ({t.REQUIRED: RACK, t.SLICE_LEVEL: RACK}, t.SLICE_LEVEL),
    ({t.REQUIRED: RACK, t.BALANCED: "yes"}, t.BALANCED),
    ({t.LEVELS: f"{RACK},,{BLOCK}", t.REQUIRED: RACK}, t.LEVELS),
    ({t.LEVELS: f"{RACK},{RACK}", t.REQUIRED: RACK}, t.LEVELS),
    ({t.LEVELS: f"{HOST},{RACK}", t.REQUIRED: RACK}, t.LEVELS),
    ({t.LEVELS: f"{ZONE}", t.REQUIRED: RACK}, t.REQUIRED),  # not one of the PodGroup's levels
])
def test_bad_annotations_name_themselves(annotations, named):
    with pytest.raises(TopologyError) as e:
        parse(annotations, [], LEVELS)
    assert str(e.value).startswith(named + ":")


def test_kueue_annotations_with_a_topology_object():
    kueue = [("cloud/zone", BLOCK, RACK, HOST)]
    got = parse({}, [{t.KUEUE_REQUIRED: BLOCK}, {t.KUEUE_REQUIRED: BLOCK}], (), kueue)
    assert got == Constraint(("cloud/zone", BLOCK, RACK, HOST), required=1, source="kueue")
    # the Topology that holds the label wins over the controller's levels for Kueue's annotations
    assert parse({}, [{t.KUEUE_PREFERRED: RACK}], LEVELS, kueue).levels == kueue[0]
    # and the controller's levels win for cogate's own
    assert parse({t.PREFERRED: RACK}, [], LEVELS, kueue).levels == (BLOCK, RACK, HOST)


def test_kueue_annotations_without_a_topology_object():
    """A required level named by a node label alone: a domain is the nodes sharing its value."""
    assert parse({}, [{t.KUEUE_REQUIRED: RACK}], ()) == Constraint((RACK, HOST), required=0, source="kueue")
    got = parse({}, [{t.KUEUE_REQUIRED: BLOCK, t.KUEUE_SLICE_REQUIRED: RACK, t.KUEUE_SLICE_SIZE: "8"}], ())
    assert got == Constraint((BLOCK, RACK, HOST), required=0, slice_size=8, slice_level=1, source="kueue")


def test_pod_group_annotations_win_over_kueue_ones():
    got = parse({t.REQUIRED: BLOCK}, [{t.KUEUE_REQUIRED: RACK}], LEVELS)
    assert got == Constraint((BLOCK, RACK, HOST), required=0)


@pytest.mark.parametrize("members, named", [
    ([{t.KUEUE_REQUIRED: RACK}, {t.KUEUE_REQUIRED: BLOCK}], t.KUEUE_REQUIRED),
    ([{t.KUEUE_REQUIRED: RACK, t.KUEUE_PREFERRED: RACK}], t.KUEUE_REQUIRED),
    ([{t.KUEUE_REQUIRED: RACK, t.KUEUE_SLICE_SIZE: "2"}], t.KUEUE_SLICE_SIZE),
    ([{t.KUEUE_REQUIRED: RACK, t.KUEUE_SLICE_REQUIRED: RACK}], t.KUEUE_SLICE_REQUIRED),
    ([{t.KUEUE_REQUIRED: "-bad"}], t.KUEUE_REQUIRED),
])
def test_bad_kueue_annotations(members, named):
    with pytest.raises(TopologyError) as e:
        parse({}, members, LEVELS)
    assert str(e.value).startswith(named)


@pytest.mark.parametrize("c, tried", [
    (Constraint((BLOCK, RACK, HOST), required=1), [1]),
    (Constraint((BLOCK, RACK, HOST), required=0, preferred=2), [2, 1, 0]),
    (Constraint((BLOCK, RACK, HOST), preferred=1), [1, 0, None]),
    (Constraint((BLOCK, RACK, HOST), required=0), [0]),
    (Constraint((BLOCK, RACK, HOST)), [None]),
])
def test_levels_tried_tightest_first(c, tried):
    assert c.tried() == tried


def test_rank_labels():
    assert t.rank_of({"batch.kubernetes.io/job-completion-index": "3"}) == 3
    assert t.rank_of({"leaderworkerset.sigs.k8s.io/worker-index": "0"}) == 0
    assert t.rank_of({"batch.kubernetes.io/job-completion-index": "x"}) is None
    assert t.rank_of({}) is None


def test_kueue_topology_levels():
    raw = {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}}
    assert t.kueue_topology_levels(raw) == (BLOCK, RACK, HOST)
    raw["spec"]["levels"].append({"nodeLabel": HOST})
    assert t.kueue_topology_levels(raw) == (BLOCK, RACK, HOST)
    for bad in ({"metadata": {"name": "x"}}, {"metadata": {"name": "x"}, "spec": {"levels": [{"other": 1}]}}):
        with pytest.raises(TopologyError, match="Topology x"):
            t.kueue_topology_levels(bad)
