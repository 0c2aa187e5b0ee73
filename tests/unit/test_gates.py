"""Scheduling-gate helpers shared by the webhook and the controller (cogate/gates.py)."""

from __future__ import annotations

import jsonpatch
import pytest

from cogate import gates

G = "scheduling.x-k8s.io/pod-group"


def pod(gate_list):
    spec = {"containers": [{"name": "c"}]}
    if gate_list is not None:
        spec["schedulingGates"] = gate_list
    return {"spec": spec}


@pytest.mark.parametrize("gate_list,names,index", [
    (None, (), None),
    ([], (), None),
    ([{"name": G}], (G,), 0),
    ([{"name": "a"}, {"name": G}, {"name": "b"}], ("a", G, "b"), 1),
    ([{"name": "a"}], ("a",), None),
    ([{}], ("",), None),
])
def test_names_and_find(gate_list, names, index):
    p = pod(gate_list)
    assert gates.names(p) == names
    assert gates.find(p, G) == index


@pytest.mark.parametrize("gate_list", [None, [], [{"name": "a"}], [{"name": "a"}, {"name": "b"}]])
def test_add_then_remove_round_trips(gate_list):
    p = pod(gate_list)
    added = jsonpatch.apply_patch(p, gates.add(p, G))
    assert gates.names(added)[-1] == G
    assert gates.names(added)[:-1] == gates.names(p), "other gates keep their order"
    assert gates.add(added, G) is None, "adding twice is a no-op"
    removed = jsonpatch.apply_patch(added, gates.remove(added, G))
    assert gates.names(removed) == gates.names(p)
    assert gates.remove(removed, G) is None


def test_add_creates_spec_when_absent():
    assert jsonpatch.apply_patch({"metadata": {}}, gates.add({"metadata": {}}, G)) == {
        "metadata": {}, "spec": {"schedulingGates": [{"name": G}]}}


def test_remove_tests_the_name_so_a_stale_patch_fails():
    before = pod([{"name": "a"}, {"name": G}])
    ops = gates.remove(before, G)
    with pytest.raises(jsonpatch.JsonPatchException):
        jsonpatch.apply_patch(pod([{"name": G}, {"name": "b"}]), ops)


@pytest.mark.parametrize("p,path", [
    ({"spec": []}, "spec"),
    (pod({"name": G}), "spec.schedulingGates"),
    (pod(["x"]), "spec.schedulingGates[0]"),
    (pod([None]), "spec.schedulingGates[0]"),
    (pod([{"name": "a"}, {"name": 7}]), "spec.schedulingGates[1].name"),
])
def test_odd_shapes_name_the_field(p, path):
    with pytest.raises(gates.GateShapeError) as err:
        gates.names(p)
    assert str(err.value).split(":")[0] == path
    with pytest.raises(gates.GateShapeError):
        gates.add(p, G)


@pytest.mark.parametrize("p", [{"spec": []}, pod({"name": G}), pod(["x", None, {"name": 7}])])
def test_find_never_refuses_a_pod(p):
    assert gates.find(p, G) is None
    assert gates.remove(p, G) is None
