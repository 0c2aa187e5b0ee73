"""Sets of PodGroups: the annotations and when a set forms (cogate.controller.model.groupsets)."""

from __future__ import annotations

import pytest

from cogate.controller.model import groupsets as gs

S, K, M = gs.SET_ANNOTATION, gs.KOORDINATOR_GROUPS_ANNOTATION, gs.SET_MINIMUM_ANNOTATION


def test_no_annotation_is_no_set():
    assert gs.parse("t", "a", None) is None
    assert gs.parse("t", "a", {"x": "y"}) is None


def test_ours_lists_names_in_the_namespace_and_adds_the_group_itself():
    assert gs.parse("t", "ps", {S: '["workers"]'}) == gs.SetSpec((("t", "ps"), ("t", "workers")), 2, S)
    assert gs.parse("t", "a", {S: '["a", "b", "c"]', M: " 2 "}) == \
        gs.SetSpec((("t", "a"), ("t", "b"), ("t", "c")), 2, S)


def test_koordinators_annotation_is_read_as_written_for_koordinator():
    got = gs.parse("t", "a", {K: '["t/a", "other/b"]'})
    assert got == gs.SetSpec((("other", "b"), ("t", "a")), 2, K)
    assert gs.parse("t", "a", {K: '["t/a", "t/b"]', S: '["b"]'}).members == (("t", "a"), ("t", "b"))


@pytest.mark.parametrize("annotations, fault", [
    ({S: "x"}, f"annotation {S}: not JSON"),
    ({S: "[]"}, "want a JSON list of PodGroup names"),
    ({S: '[1]'}, "want a JSON list"),
    ({S: '["a/b/c"]'}, "'a/b/c' is not a PodGroup name or namespace/name"),
    ({S: '["b"]', M: "x"}, f"annotation {M}: 'x' is not an integer"),
    ({S: '["b"]', M: "3"}, f"annotation {M}: 3, want 1 to 2"),
    ({S: '["b"]', M: "0"}, "want 1 to 2"),
    ({M: "1"}, f"annotation {M} without {S}"),
    ({S: '["b"]', K: '["t/c"]'}, "name different sets"),
    ({S: '[' + ",".join(f'"g{i}"' for i in range(64)) + ']'}, "65 PodGroups, at most 64"),
])
def test_bad_annotations_name_the_fault(annotations, fault):
    with pytest.raises(gs.SetError) as e:
        gs.parse("t", "a", annotations)
    assert fault in str(e.value)


def spec(*names, minimum=None):
    members = tuple(sorted(("t", n) for n in names))
    return gs.SetSpec(members, minimum or len(members), S)


def test_a_set_forms_only_when_every_group_names_it():
    ab = spec("a", "b")
    formed = gs.form({("t", "a"): ab, ("t", "b"): ab, ("t", "c"): None})
    assert formed.sets == {("t", "a"): gs.GroupSet(ab.members, 2), ("t", "b"): gs.GroupSet(ab.members, 2)}
    assert formed.waiting == {}


@pytest.mark.parametrize("specs, why", [
    ({("t", "a"): spec("a", "b")}, "set [a, b]: PodGroup b of the set does not exist"),
    ({("t", "a"): spec("a", "b"), ("t", "b"): None}, "set [a, b]: PodGroup b names no set (annotation cogate.dev/gang-set or gang.scheduling.koordinator.sh/groups)"),
    ({("t", "a"): spec("a", "b"), ("t", "b"): spec("b", "c"), ("t", "c"): spec("b", "c")},
     "set [a, b]: PodGroup b names another set, [b, c]"),
    ({("t", "a"): spec("a", "b", minimum=1), ("t", "b"): spec("a", "b")},
     "set [a, b]: PodGroup b names minimum 2 of the set, this one 1"),
])
def test_a_set_that_does_not_form_says_why(specs, why):
    formed = gs.form(specs)
    assert ("t", "a") not in formed.sets and formed.waiting[("t", "a")] == why


def test_a_group_whose_sibling_cannot_form_the_set_waits_too():
    abc = spec("a", "b", "c")
    formed = gs.form({("t", "a"): abc, ("t", "b"): abc, ("t", "c"): spec("c", "d")})
    assert formed.sets == {}
    assert formed.waiting[("t", "a")] == "set [a, b, c]: PodGroup c names another set, [c, d]"
    assert formed.waiting[("t", "b")].startswith("set [a, b, c]: PodGroup ")


def test_an_unreadable_sibling_is_named():
    formed = gs.form({("t", "a"): spec("a", "b")}, invalid=[("t", "b")])
    assert formed.waiting[("t", "a")] == "set [a, b]: PodGroup b of the set has set annotations that cannot be read"


def test_cross_namespace_names_carry_the_namespace():
    ab = gs.SetSpec((("o", "b"), ("t", "a")), 2, K)
    formed = gs.form({("t", "a"): ab})
    assert formed.waiting[("t", "a")] == "set [o/b, a]: PodGroup o/b of the set does not exist"
