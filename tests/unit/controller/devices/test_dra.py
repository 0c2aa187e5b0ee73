"""DRA devices as planner resources (controller/devices/dra.py): members' claims, devices per node, devices
in use, and the planner's verdicts over them (issue 17)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.devices import dra
from cogate.controller.devices.accountant import Accountant
from cogate.controller.devices.records import (
    ClaimSpec,
    DeviceRequest,
    Signature,
    claim_template_info,
    device_claim_info,
    device_class_info,
    slice_devices,
)
from cogate.controller.planning.planner import GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.model.records import NodeInfo, pod_info
from cogate.controller.model.verdicts import held_constraints
from tests import builders as kit
from tests.builders import node, pod

DRIVER = "gpu.example.com"
GPU = DRIVER  # the device class
RES = "gpu.example.com devices"
HOST = "kubernetes.io/hostname"


def rslice(node, *devices, driver=DRIVER):
    return slice_devices({"metadata": {"name": f"{node}-{driver}"}, "spec": {
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": name, "attributes": {"model": {"string": model}}} for name, model in devices]}})


def dclass(name=GPU, driver=DRIVER, extended=None):
    spec = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return device_class_info({"metadata": {"name": name}, "spec": spec})


def request(name="gpu", cls=GPU, count=1, mode=None, selectors=()):
    exactly = {"deviceClassName": cls, "count": count}
    if mode:
        exactly["allocationMode"] = mode
        if mode == "All":
            del exactly["count"]
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": exactly}


def claim(name, *requests, allocated=(), reserved=(), deleting=False, extra=None, ns="default"):
    b = kit.claim(name, ns).request(*(requests or (request(),))).devices(**(extra or {}))
    for pool, dev in allocated:
        b.allocated(DRIVER, pool, dev)
    if reserved:
        b.reserved_for(*reserved)
    if deleting:
        b.deleting("2026-01-01T00:00:00Z")
    return b.info()


def template(name, *requests, ns="default"):
    return claim_template_info({"metadata": {"name": name, "namespace": ns},
                                "spec": {"spec": {"devices": {"requests": list(requests or (request(),))}}}})


def inputs(slices=(), classes=(dclass(),), claims=(), templates=(), version=1):
    return dra.DeviceInputs(
        devices=tuple(d for s in slices for d in s),
        classes={c.name: c for c in classes},
        claims={(c.namespace, c.name): c for c in claims},
        templates={(ns, name): spec for ns, name, spec in templates},
        version=version)


def member(name, *claims, cpu="1", node_name="", created=0.0, statuses=None):
    b = pod(name, "default").group("g").req(cpu=cpu).created(f"2026-01-01T00:00:{int(created):02d}Z").spec(
        resourceClaims=[{"name": c, "resourceClaimName": c} if not c.startswith("tpl:")
                        else {"name": "gpu", "resourceClaimTemplateName": c[4:]} for c in claims])
    if node_name:
        b.on(node_name)
    else:
        b.gated()
    if statuses:
        b.status(resourceClaimStatuses=[{"name": k, "resourceClaimName": v} for k, v in statuses.items()])
    return b.info()


def plan(nodes, members, min_member, world, bound=(), cfg=PlannerConfig()):
    """Account the devices, then plan one group of ``members`` the way the reconciler does."""
    resolved, acc = dra.account(members, {p.uid: p.node_name for p in bound}, world, dra.Selection())
    nodes = [NodeInfo(n.name, n.labels, dra.with_devices(n.allocatable, acc.allocatable.get(n.name))) for n in nodes]
    bound = [dataclasses.replace(p, requests=dra.with_devices(p.requests, acc.charges.get(p.uid))) for p in bound]
    state = PlanningState.build(nodes, bound)
    for name, held in acc.held.items():
        state.set_held(name, held)
    g = GroupRequest("default", "g", min_member, 0.0, False, tuple(resolved))
    verdict = state.decide([g], [], 1000.0, cfg).verdicts[0]
    if not acc.held:  # without held room the from-scratch planner says the same
        assert decide(nodes, list(bound), [g], [], 1000.0, cfg).verdicts[0] == verdict
    return verdict, resolved, acc


# -- the trial: two nodes with one device each, a gang of 3 claiming one each -----------------

def test_half_placement_trial_stays_gated_whole_and_says_why():
    world = inputs([rslice("n1", ("gpu-0", "a100")), rslice("n2", ("gpu-0", "a100"))],
                   claims=[claim(f"c{i}") for i in range(3)])
    members = [member(f"m{i}", f"c{i}") for i in range(3)]
    v, resolved, acc = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                             node("n2").alloc(cpu=8, memory="64Gi").info()], members, 3, world)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and v.release == {}, "2 devices in all: never fits"
    assert all(m.requests[RES] == 1 and m.unplanned == () for m in resolved)
    assert acc.allocatable == {"n1": {RES: 1}, "n2": {RES: 1}}
    assert v.message == (f"fits 2 of 3 even with every eligible node empty: {RES} short by 1 on eligible nodes "
                         "(at most 0 free on one node, a member requests 1)")


def test_a_third_device_releases_the_gang_one_device_each():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100")), rslice("n2", ("gpu-0", "a100"))],
                   claims=[claim(f"c{i}") for i in range(3)])
    members = [member(f"m{i}", f"c{i}") for i in range(3)]
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                    node("n2").alloc(cpu=8, memory="64Gi").info()], members, 3, world)
    assert v.outcome == Outcome.RELEASED
    placed = sorted(v.release.values())
    assert placed == ["n1", "n1", "n2"], "no node is given more members than it has free devices"


def test_templates_plan_before_the_claim_exists_and_the_made_claim_after():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))], templates=[template("t", request(count=2))],
                   claims=[claim("m1-gpu-x", request(count=1))])
    before = member("m0", "tpl:t")
    after = member("m1", "tpl:t", statuses={"gpu": "m1-gpu-x"})
    lost = member("m2", "tpl:t", statuses={"gpu": "gone"})  # the made claim is not in the cache yet: the template
    (b, a, l), _ = dra.account([before, after, lost], {}, world, dra.Selection())
    assert b.requests[RES] == 2 and a.requests[RES] == 1 and l.requests[RES] == 2
    assert b.unplanned == a.unplanned == l.unplanned == ()


@pytest.mark.parametrize("make,problem", [
    (lambda: (member("m", "nope"), inputs()), "resourceclaim 'nope' not found"),
    (lambda: (member("m", "tpl:nope"), inputs()), "resourceclaimtemplate 'nope' not found"),
    (lambda: (member("m", "c"), inputs(claims=[claim("c", deleting=True)])), "resourceclaim 'c' is being deleted"),
])
def test_claim_problems_hold_the_group_whatever_the_policy(make, problem):
    m, world = make()
    for policy in ("release", "hold-devices", "hold"):
        v, (r,), _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()],
                          [m], 1, world, cfg=PlannerConfig(unchecked=policy))
        assert r.volume_problems == (problem,)
        assert v.outcome == Outcome.UNSCHEDULABLE and problem in v.message


def test_multiple_requests_per_claim_and_several_claims_add_up():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "h100"), ("gpu-2", "h100"))],
                   claims=[claim("c", request("a", selectors=['device.attributes["gpu.example.com"].model == "a100"']),
                                 request("h", count=2, selectors=['device.attributes["gpu.example.com"].model == "h100"'])),
                           claim("d", request("any"))])
    (m,), acc = dra.account([member("m", "c", "d")], {}, world, dra.Selection())
    device_resources = {k: v for k, v in m.requests.items() if dra.is_device_resource(k)}
    # nested selections (a100 and h100 within the class): each request also asks for the class's
    # devices, so the class resource carries all 4 devices asked and every device counts for the class
    assert sorted(device_resources.values()) == [1, 2, 4] and device_resources[RES] == 4
    assert sorted(acc.allocatable["n1"].values()) == [1, 2, 3] and acc.allocatable["n1"][RES] == 3
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member("m", "c", "d")], 1, world)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY, "4 devices asked of 3: no false fit"


# -- devices in use ---------------------------------------------------------------------------------

def test_allocated_devices_are_charged_to_the_bound_pod_holding_them():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))],
                   claims=[claim("held", allocated=[("n1", "gpu-0")], reserved=["uid-b", "uid-gone"]),
                           claim("c0"), claim("c1")])
    b = member("b", "held", node_name="n1")
    members = [member("m0", "c0"), member("m1", "c1")]
    v, _, acc = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], members, 2, world, bound=[b])
    assert acc.allocatable == {"n1": {RES: 2}} and acc.charges == {"uid-b": {RES: 1}}
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY
    # the empty cluster has both devices: waiting for the bound pod, not "never fits"
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()],
                   members, 2, inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))],
                                      claims=[claim("c0"), claim("c1")]))
    assert v.outcome == Outcome.RELEASED


def test_an_allocation_no_bound_pod_holds_takes_the_device_from_the_node():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))],
                   claims=[claim("kept", allocated=[("n1", "gpu-1")]), claim("c0")])
    (m,), acc = dra.account([member("m0", "c0")], {}, world, dra.Selection())
    assert acc.allocatable == {"n1": {RES: 2}} and acc.charges == {}
    assert acc.held == {"n1": {RES: 1}}, "in use, by no pod: held room, the node's allocatable unchanged"
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member("m0", "c0"), member("m1", "c1")], 2,
                   inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))],
                          claims=[claim("kept", allocated=[("n1", "gpu-1")]), claim("c0"), claim("c1")]))
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY


def test_a_gang_larger_than_every_device_never_fits():
    world = inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("c0"), claim("c1")])
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member("m0", "c0"), member("m1", "c1")], 2, world)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and RES in v.message


# -- allocationMode All -----------------------------------------------------------------------------

def test_all_mode_takes_a_whole_free_node():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100")), rslice("n2", ("gpu-0", "a100"))],
                   claims=[claim("a0", request(mode="All")), claim("a1", request(mode="All")),
                           claim("busy", allocated=[("n2", "gpu-0")])])
    res = dra.resource_name(Signature(GPU), True)
    resolved, acc = dra.account([member("m0", "a0"), member("m1", "a1")], {}, world, dra.Selection())
    assert [m.requests[res] for m in resolved] == [1, 1]
    assert acc.allocatable == {"n1": {res: 1}, "n2": {res: 1}} and acc.held == {"n2": {res: 1}}, \
        "a node with a device in use has no 'all' to give"
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                    node("n2").alloc(cpu=8, memory="64Gi").info()], [member("m0", "a0"), member("m1", "a1")], 2, world)
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY
    held = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100")), rslice("n2", ("gpu-0", "a100"))],
                  claims=[claim("a0", request(mode="All")), claim("a1", request(mode="All")),
                          claim("busy", allocated=[("n2", "gpu-0")], reserved=["uid-b"])])
    b = member("b", "busy", node_name="n2")
    v, _, acc = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                      node("n2").alloc(cpu=8, memory="64Gi").info()], [member("m0", "a0"),
                      member("m1", "a1")], 2, held, bound=[b])
    assert acc.allocatable == {"n1": {res: 1}, "n2": {res: 1}} and acc.charges == {"uid-b": {res: 1}}
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, "n2 frees when its pod goes"
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                    node("n2").alloc(cpu=8, memory="64Gi").info()], [member("m0", "a0")], 1, world)
    assert v.outcome == Outcome.RELEASED and v.release == {"uid-m0": "n1"}


def test_all_mode_overlapping_other_requests_is_unchecked():
    world = inputs([rslice("n1", ("gpu-0", "a100"))], claims=[
        claim("a", request(mode="All")),
        claim("c", request(selectors=['device.attributes["gpu.example.com"].model == "a100"']))])
    resolved, _ = dra.account([member("m0", "a"), member("m1", "c")], {}, world, dra.Selection())
    assert resolved[0].unplanned == ("resource claim of class gpu.example.com: allocationMode All on devices "
                                     "other requests also select",)
    assert resolved[1].unplanned == ()


# -- what is named unchecked --------------------------------------------------------------------------

@pytest.mark.parametrize("world,member_,entry", [
    (inputs([rslice("n1", ("gpu-0", "a100"))], classes=(), claims=[claim("c")]), member("m", "c"),
     "resource claim of class gpu.example.com: device class 'gpu.example.com' not found"),
    (inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("c", extra={"constraints": [
        {"matchAttribute": "gpu.example.com/model"}]})]), member("m", "c"),
     "resource claim c: constraints (matchAttribute)"),
    (inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("c", allocated=[("n1", "gpu-0")])]), member("m", "c"),
     "resource claim c: allocated already (its node is not planned)"),
    (inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("c", request(selectors=["device.nosuch()"]))]),
     member("m", "c"), None),
])
def test_unchecked_claims_are_named_and_hold_by_default(world, member_, entry):
    (r,), _ = dra.account([member_], {}, world, dra.Selection())
    assert len(r.unplanned) == 1 and (entry is None or r.unplanned == (entry,))
    assert r.unplanned[0].startswith("resource claim")
    assert not any(dra.is_device_resource(k) for k in r.requests)
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member_], 1, world)
    assert v.outcome == Outcome.UNSCHEDULABLE and r.unplanned[0] in v.message and "hold-devices" in v.message
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()],
                   [member_], 1, world, cfg=PlannerConfig(unchecked="release"))
    assert v.outcome == Outcome.RELEASED and v.release == {member_.uid: ""} and r.unplanned[0] in v.message


def test_devices_published_for_several_nodes_are_unchecked():
    shared = slice_devices({"metadata": {"name": "net"}, "spec": {
        "driver": DRIVER, "allNodes": True, "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "nic-0"}]}})
    world = inputs([shared], claims=[claim("c")])
    (r,), acc = dra.account([member("m", "c")], {}, world, dra.Selection())
    assert r.unplanned == ("resource claim of class gpu.example.com: device nic-0 of pool net is published for "
                           "several nodes (ResourceSlice nodeSelector or allNodes)",)
    assert acc.allocatable == {}


def test_a_claim_shared_by_gated_members_is_unchecked_for_each_naming_the_other():
    world = inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("shared")])
    a, b = member("a", "shared", created=1), member("b", "shared", created=2)
    (ra, rb), _ = dra.account([a, b], {}, world, dra.Selection())
    assert ra.unplanned == ("resource claim shared: shared with member b (where they meet is not planned)",)
    assert rb.unplanned == ("resource claim shared: shared with member a (where they meet is not planned)",)


def test_bound_members_and_pods_without_claims_are_returned_unchanged():
    world = inputs([rslice("n1", ("gpu-0", "a100"))], claims=[claim("c")])
    b = member("b", "c", node_name="n1")
    plain = pod_info({"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                      "spec": {"containers": [{"name": "c"}]}, "status": {}})
    out, _ = dra.account([b, plain], {}, world, dra.Selection())
    assert out[0] is b and out[1] is plain


def test_held_constraints_per_policy():
    unplanned = ("unbound volume claim data", "resource claims", "resource claim c: allocated already")
    assert held_constraints(unplanned, "release") == []
    assert held_constraints(unplanned, "hold-devices") == ["resource claims", "resource claim c: allocated already"]
    assert held_constraints(unplanned, "hold") == list(unplanned)


def test_resource_names():
    assert dra.resource_name(Signature("gpu.example.com")) == "gpu.example.com devices"
    narrowed = dra.resource_name(Signature("gpu.example.com", ("x",)))
    assert narrowed.startswith("gpu.example.com devices [") and narrowed != dra.resource_name(
        Signature("gpu.example.com", ("y",)))
    assert dra.resource_name(Signature("c"), True) == "all c devices of a node"
    assert all(dra.is_device_resource(n) for n in (narrowed, "gpu.example.com devices", "all c devices of a node"))
    assert not any(dra.is_device_resource(n) for n in ("cpu", "example.com/gpu", "nvidia.com/gpu"))
    assert dra.with_devices({"cpu": 1, "old devices": 3}, {"new devices": 2}) == {"cpu": 1, "new devices": 2}


def test_selection_is_cached_per_version():
    calls = []
    sel = dra.Selection()
    real = sel.matcher.matches
    sel.matcher.matches = lambda *a: calls.append(1) or real(*a)  # type: ignore[method-assign]
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))])
    assert sel.of(Signature(GPU), world)[0] == {(DRIVER, "n1", "gpu-0"), (DRIVER, "n1", "gpu-1")}
    sel.of(Signature(GPU), world)
    assert len(calls) == 2
    sel.of(Signature(GPU), inputs([rslice("n1", ("gpu-0", "a100"))], version=2))
    assert len(calls) == 3


# -- property: the counts never promise a device twice (no false fits) -----------------------------------

MODELS = ("a100", "h100", "l4")


@st.composite
def worlds(draw):
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 3)))]
    slices = [rslice(n, *[(f"d{j}", draw(st.sampled_from(MODELS))) for j in range(draw(st.integers(0, 3)))])
              for n in nodes]
    devices = [(d.node, d.name) for s in slices for d in s]
    taken = draw(st.lists(st.sampled_from(devices), unique=True, max_size=len(devices))) if devices else []
    claims = [claim(f"held{i}", allocated=[(n, d)], reserved=["uid-x"] if draw(st.booleans()) else [])
              for i, (n, d) in enumerate(taken)]
    members = []
    for i in range(draw(st.integers(1, 4))):
        reqs = []
        for j in range(draw(st.integers(1, 2))):
            model = draw(st.sampled_from((None, *MODELS)))
            sel = [f'device.attributes["gpu.example.com"].model == "{model}"'] if model else []
            reqs.append(request(f"r{j}", count=draw(st.integers(1, 2)), selectors=sel))
        claims.append(claim(f"c{i}", *reqs))
        members.append(member(f"m{i}", f"c{i}", cpu="0"))
    return nodes, slices, claims, members, taken


def _matching_exists(asks, free):
    """Whether every (node, selectors, count) ask can be given distinct free devices (brute force)."""
    slots = [(n, sel) for n, sel, count in asks for _ in range(count)]

    def ok(dev, sel):
        return all(f'"{dev[2]}"' in s for s in sel)

    def go(i, used):
        if i == len(slots):
            return True
        n, sel = slots[i]
        return any(go(i + 1, used | {d}) for d in free if d[0] == n and d not in used and ok(d, sel))
    return go(0, frozenset())


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_any_release_can_be_given_distinct_free_devices(world_):
    nodes, slices, claims, members, taken = world_
    world = inputs(slices, claims=claims)
    v, resolved, acc = plan([node(n).alloc(cpu=8, memory="64Gi").info() for n in nodes], members, len(members), world)
    per_node = {}
    for s in slices:
        for d in s:
            per_node[d.node] = per_node.get(d.node, 0) + 1
    for n, counts in acc.allocatable.items():
        assert max(counts.values()) <= per_node.get(n, 0), "a signature counted a device twice"
    if v.outcome != Outcome.RELEASED or any(m.unplanned for m in resolved):
        return
    model_of = {(d.node, d.name): d.view.attributes[DRIVER]["model"] for s in slices for d in s}
    free = [(n, d, model_of[(n, d)]) for (n, d) in model_of if (n, d) not in set(taken)]
    asks = []
    by_name = {c.name: c for c in claims}
    for m in members:
        for r in by_name[m.resource_claims[0].claim].spec.requests:
            asks.append((v.release[m.uid], r.selectors, r.count))
    assert _matching_exists(asks, free), f"released {v.release} but no distinct devices for {asks}"


def test_spec_records_used_here_are_the_devices_module_records():
    # The model reads devices.ClaimSpec/DeviceRequest as parsed: a template's spec is a ClaimSpec.
    _, _, spec = template("t", request(count=3))
    assert isinstance(spec, ClaimSpec) and spec.requests == (DeviceRequest("gpu", GPU, (), "ExactCount", 3),)


# -- extended resources backed by DRA (KEP-5004) ------------------------------------------------------

def ext_member(name, count=1, node_name=""):
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "example.com/gpu": str(count)},
                                                       "limits": {"example.com/gpu": str(count)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["schedulingGates"] = [{"name": GATE}]
    return pod_info({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                  "labels": {POD_GROUP_LABEL: "g"}},
                     "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}})


def test_extended_resource_backed_by_a_device_class_is_planned_against_its_devices():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100")), rslice("n2", ("gpu-0", "a100"))],
                   classes=(dclass(extended="example.com/gpu"),))
    members = [ext_member(f"m{i}") for i in range(3)]
    resolved, acc = dra.account(members, {}, world, dra.Selection())
    assert acc.allocatable == {"n1": {"example.com/gpu": 2}, "n2": {"example.com/gpu": 1}}
    assert [m.requests["example.com/gpu"] for m in resolved] == [1, 1, 1] and all(not m.unplanned for m in resolved)
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                    node("n2").alloc(cpu=8, memory="64Gi").info()], members, 3, world)
    assert v.outcome == Outcome.RELEASED and sorted(v.release.values()) == ["n1", "n1", "n2"]
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info(),
                    node("n2").alloc(cpu=8, memory="64Gi").info()], members + [ext_member("m3")], 4, world)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and "example.com/gpu short by 1" in v.message
    # before: no node has example.com/gpu in allocatable, so every plan said "never fits"
    g = GroupRequest("default", "g", 3, 0.0, False, tuple(members))
    assert decide([node("n1").alloc(cpu=8, memory="64Gi").info(),
                   node("n2").alloc(cpu=8, memory="64Gi").info()], [], [g], [], 1000.0).verdicts[0].outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY


def test_the_implicit_extended_resource_name_of_every_class():
    assert dra.backed_extended({GPU: dclass()}) == {f"deviceclass.resource.kubernetes.io/{GPU}": GPU}
    two = {"a": dclass("a", extended="example.com/gpu"), "b": dclass("b", extended="example.com/gpu")}
    assert dra.backed_extended(two)["example.com/gpu"] is None
    world = inputs([rslice("n1", ("gpu-0", "a100"))], classes=tuple(two.values()))
    (r,), _ = dra.account([ext_member("m")], {}, world, dra.Selection())
    assert r.unplanned == ("resource claim for example.com/gpu: several device classes name it as their "
                           "extendedResourceName",)


def test_a_device_plugin_node_keeps_its_own_amount_and_bound_pods_are_not_charged_twice():
    world = inputs([rslice("n1", ("gpu-0", "a100"), ("gpu-1", "a100"))],
                   classes=(dclass(extended="example.com/gpu"),),
                   claims=[claim("b-ext", allocated=[("n1", "gpu-0")], reserved=["uid-b"])])
    world = dataclasses_replace_claim(world, "b-ext", extended=True)
    b = ext_member("b", node_name="n1")
    (m,), acc = dra.account([ext_member("m")], {"uid-b": "n1"}, world, dra.Selection())
    assert acc.allocatable == {"n1": {"example.com/gpu": 2}} and acc.charges == {}, "b's own request counts its device"
    assert dra.with_devices({"cpu": 1, "example.com/gpu": 4}, {"example.com/gpu": 2}) == {"cpu": 1, "example.com/gpu": 4}
    assert dra.with_devices({"cpu": 1}, {"example.com/gpu": 2}) == {"cpu": 1, "example.com/gpu": 2}
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()],
                   [ext_member("m0"), ext_member("m1")], 2, world, bound=[b])
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, "2 devices, b holds one: one member fits"


def dataclasses_replace_claim(world, name, **changes):
    import dataclasses

    claims = dict(world.claims)
    claims[("default", name)] = dataclasses.replace(claims[("default", name)], **changes)
    return dataclasses.replace(world, claims=claims)


def test_the_extended_resource_claim_annotation_is_read():
    c = device_claim_info({"metadata": {"name": "x", "namespace": "d", "annotations": {
        "resource.kubernetes.io/extended-resource-claim": "true"}}, "spec": {"devices": {"requests": []}}})
    assert c.extended
    assert not claim("y").extended


# -- Accountant: the same as account(), incrementally -------------------------------------------------

@st.composite
def histories(draw):
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 3)))]
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        steps.append(draw(st.sampled_from(("allocate", "free", "bind", "unbind", "device", "member", "drop",
                                           "nothing"))))
    seed = draw(st.integers(0, 2**16))
    return nodes, steps, seed


@settings(max_examples=150, deadline=None)
@given(histories(), st.booleans())
def test_accountant_gives_what_account_gives_over_any_history(history, tell_claims):
    """The incremental Accountant against the from-scratch account() after every step of a random
    history (allocations, frees, binds, new devices, members coming and going); told which claims
    changed, or not."""
    import random

    nodes, steps, seed = history
    rnd = random.Random(seed)
    devs = {n: [(f"d{j}", rnd.choice(MODELS)) for j in range(rnd.randint(1, 3))] for n in nodes}
    bound: set[str] = set()
    claims: dict[str, object] = {}
    changed_claims: set[tuple[str, str]] = set()

    def put(name, c):
        claims[name] = c
        changed_claims.add(("default", name))

    members = {}
    for i in range(rnd.randint(1, 3)):
        members[f"m{i}"] = rnd.choice((1, 2))
        put(f"c-m{i}", claim(f"c-m{i}", request(count=members[f"m{i}"])))
    version = claims_version = 1
    acc = Accountant()
    changed: set[str] = set()
    pods = {m: member(m, f"c-{m}") for m in members}
    for step in steps + ["nothing"]:
        held = {(n, d) for c in claims.values() for (_, n, d) in c.allocated}
        if step == "allocate":
            free = [(n, d) for n, ds in devs.items() for d, _ in ds if (n, d) not in held]
            if free:
                n, d = rnd.choice(free)
                put(f"h-{n}-{d}", claim(f"h-{n}-{d}", allocated=[(n, d)],
                                        reserved=[rnd.choice(("uid-a", "uid-b", "uid-c"))]))
        elif step == "free":
            names = sorted(k for k, c in claims.items() if c.allocated)
            if names:
                name = rnd.choice(names)
                put(name, claim(name))  # deallocated, still there
        elif step in ("bind", "unbind"):
            u = rnd.choice(("uid-a", "uid-b", "uid-c"))
            (bound.add if step == "bind" else bound.discard)(u)
            changed.add(u)
        elif step == "device":
            n = rnd.choice(nodes)
            devs[n] = devs[n] + [(f"d{len(devs[n])}", rnd.choice(MODELS))]
            version += 1
        elif step == "member":
            m = f"m{len(members) + 5}"
            members[m] = rnd.choice((1, 2))
            put(f"c-{m}", claim(f"c-{m}", request(count=members[m], selectors=[] if members[m] == 1 else [
                'device.attributes["gpu.example.com"].model == "a100"'])))
            pods[m] = member(m, f"c-{m}")
        elif step == "drop" and members:
            m = rnd.choice(sorted(members))
            del members[m], pods[m]
        if changed_claims:
            claims_version += 1
        w = dataclasses.replace(inputs([rslice(n, *ds) for n, ds in devs.items()], claims=list(claims.values()),
                                       version=version), claims_version=claims_version)
        live = [pods[m] for m in sorted(pods)]
        on = {u: nodes[int(u[-1], 36) % len(nodes)] for u in bound}  # each holder on one node
        want = dra.account(live, on, w, dra.Selection())
        got = acc.account(live, on, w, set(changed), set(changed_claims) if tell_claims else None)
        changed.clear()
        changed_claims.clear()
        assert got[0] == want[0], step
        assert got[1] == want[1], step


def test_planning_state_held_room_is_taken_from_free_room_and_survives_node_changes():
    n = NodeInfo("n1", labels={HOST: "n1"}, allocatable={"cpu": 4000, "pods": 10, RES: 3})
    state = PlanningState.build([n], [])
    state.set_held("n1", {RES: 2})
    assert state.room_by_node()["n1"][0][RES] == 1
    state.upsert_node(dataclasses.replace(n, allocatable={"cpu": 8000, "pods": 10, RES: 3}))
    assert state.room_by_node()["n1"][0] == {"cpu": 8000, "pods": 10, RES: 1}
    state.remove_node("n1")
    state.upsert_node(n)
    assert state.room_by_node()["n1"][0][RES] == 1, "kept while the node went and came back"
    state.set_held("n1", {RES: 1})
    assert state.room_by_node()["n1"][0][RES] == 2
    state.set_held("n1", None)
    assert state.room_by_node()["n1"][0] == {"cpu": 4000, "pods": 10, RES: 3}
    state.set_held("gone", {RES: 1})  # a node not known yet: charged when it comes
    state.upsert_node(NodeInfo("gone", allocatable={RES: 1, "pods": 1}))
    assert RES not in state.room_by_node()["gone"][0]


def test_nested_requests_are_counted_exactly_and_overlapping_ones_conservatively():
    """The differential run's false negative: a class-wide request beside narrower ones (a100
    only, h100 only) on nodes with both models. Each device counted toward one signature left the
    class-wide requests nothing; nested sets are now counted exactly."""
    world = inputs([rslice("n1", ("d0", "a100"), ("d1", "h100"), ("d2", "h100"))],
                   claims=[claim("any"), claim("a", request(selectors=['device.attributes["gpu.example.com"].model == "a100"'])),
                           claim("h", request(selectors=['device.attributes["gpu.example.com"].model == "h100"']))])
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member("m0", "any"), member("m1", "a"),
                    member("m2", "h")], 3, world)
    assert v.outcome == Outcome.RELEASED, v.message
    # 4 asked of 3 is still short
    world4 = inputs([rslice("n1", ("d0", "a100"), ("d1", "h100"), ("d2", "h100"))],
                    claims=list(world.claims.values()) + [claim("any2")])
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], [member("m0", "any"), member("m1", "a"),
                    member("m2", "h"), member("m3", "any2")],
                   4, world4)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY
    # overlapping, not nested ({a100, h100} and {h100, l4}): each device toward one signature only
    model = 'device.attributes["gpu.example.com"].model'
    crossing = inputs([rslice("n1", ("d0", "a100"), ("d1", "h100"), ("d2", "l4"))],
                      claims=[claim("a", request(selectors=[f'{model} == "a100" || {model} == "h100"'])),
                              claim("b", request(count=2, selectors=[f'{model} == "h100" || {model} == "l4"']))])
    members = [member("m0", "a"), member("m1", "b")]
    (ra, rb), acc = dra.account(members, {}, crossing, dra.Selection())
    assert sorted(acc.allocatable["n1"].values()) == [1, 2] and sum(acc.allocatable["n1"].values()) == 3
    v, _, _ = plan([node("n1").alloc(cpu=8, memory="64Gi").info()], members, 2, crossing)
    assert v.outcome != Outcome.RELEASED, "conservative: a real assignment exists (a100; h100+l4), the count misses it"
