"""DRA objects as the planner reads them (controller/devices/records.py): resource.k8s.io/v1 JSON -> records."""

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogate.controller.devices.cel import DeviceView, Quantity, Semver, compile_selector
from cogate.controller.devices.records import (
    ALL,
    EXACT_COUNT,
    Device,
    DeviceClassInfo,
    DeviceRequest,
    Matcher,
    Signature,
    assign,
    claim_template_info,
    device_claim_info,
    device_class_info,
    slice_devices,
)
from cogate.controller.model.records import InvalidObject, NodeInfo
from tests import builders as kit

GI = 2**30


def rslice(**spec):
    base = {"driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [{"name": "gpu-0",
                         "attributes": {"model": {"string": "a100"}, "index": {"int": 0},
                                        "driverVersion": {"version": "1.2.3"},
                                        "pci.example.com/root": {"string": "pci0"}, "healthy": {"bool": True}},
                         "capacity": {"memory": {"value": "80Gi"}}}]}
    base.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": base}


def test_node_local_slice():
    (d,) = slice_devices(rslice())
    assert d.key == ("gpu.example.com", "node-1", "gpu-0")
    assert d.node == "node-1" and not d.all_nodes and d.node_terms == () and d.unmodelled == ()
    assert d.view.attributes == {"gpu.example.com": {"model": "a100", "index": 0, "driverVersion": Semver("1.2.3"),
                                                     "healthy": True},
                                 "pci.example.com": {"root": "pci0"}}
    assert d.view.capacity == {"gpu.example.com": {"memory": Quantity(Fraction(80 * GI))}}
    # the driver's domain is what a selector reads
    assert compile_selector('device.attributes["gpu.example.com"].model == "a100" && '
                            'device.attributes["pci.example.com"].root == "pci0" && '
                            'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0').matches(d.view)


def test_network_slices():
    (d,) = slice_devices(rslice(nodeName=None, allNodes=True))
    assert d.all_nodes and d.node == ""
    (d,) = slice_devices(rslice(nodeName=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}))
    assert len(d.node_terms) == 1
    assert d.node_terms[0].matches(NodeInfo("n", labels={"rack": "r1"}))
    assert not d.node_terms[0].matches(NodeInfo("n", labels={"rack": "r2"}))


@pytest.mark.parametrize("device,spec,what", [
    ({"consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}]}, {},
     "partitionable device (consumesCounters)"),
    ({"taints": [{"key": "k", "effect": "NoSchedule"}]}, {}, "device taints"),
    ({"bindingConditions": ["attached"]}, {}, "binding conditions"),
    ({"allowMultipleAllocations": True}, {}, "consumable capacity (allowMultipleAllocations)"),
    ({"nodeName": "node-1"}, {"nodeName": None, "perDeviceNodeSelection": True}, "per-device node selection"),
])
def test_unmodelled_device_features_are_named(device, spec, what):
    (d,) = slice_devices(rslice(devices=[{"name": "x", **device}], **spec))
    assert what in d.unmodelled


@pytest.mark.parametrize("spec,field", [
    ({"driver": None}, "spec.driver"),
    ({"devices": [{"name": "x", "attributes": {"a": {"int": 1, "string": "b"}}}]}, "spec.devices[0].attributes[a]"),
    ({"devices": [{"name": "x", "attributes": {"a": {"int": "1"}}}]}, "spec.devices[0].attributes[a].int"),
    ({"devices": [{"name": "x", "attributes": {"a": {"version": "1.2"}}}]}, "spec.devices[0].attributes[a].version"),
    ({"devices": [{"name": "x", "capacity": {"m": {"value": "lots"}}}]}, "spec.devices[0].capacity[m].value"),
    ({"devices": "none"}, "spec.devices"),
    ({"allNodes": "yes", "nodeName": None}, "spec.allNodes"),
])
def test_invalid_slices_name_the_field(spec, field):
    with pytest.raises(InvalidObject, match="^" + re.escape(field)):
        slice_devices(rslice(**spec))


def test_device_class():
    c = device_class_info({"metadata": {"name": "gpu.example.com"},
                           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                                    "extendedResourceName": "example.com/gpu"}})
    assert c.name == "gpu.example.com"
    assert c.selectors == ('device.driver == "gpu.example.com"',)
    assert c.extended_resource_name == "example.com/gpu"
    assert device_class_info({"metadata": {"name": "x"}, "spec": {}}).extended_resource_name == ""
    with pytest.raises(InvalidObject, match=r"^spec.selectors\[0\].cel.expression"):
        device_class_info({"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": 3}}]}})


def claim(requests, status=None, **devices):
    return kit.claim("c", "ns").request(*requests).devices(**devices).status(**(status or {})).raw()


def test_claim_requests_and_allocation():
    c = device_claim_info(claim(
        [{"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 2,
                                      "selectors": [{"cel": {"expression": "true"}}]}},
         {"name": "nic", "exactly": {"deviceClassName": "nic.example.com"}},
         {"name": "all", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}}],
        status={"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}))
    assert [(r.name, r.device_class, r.mode, r.count, r.selectors) for r in c.spec.requests] == [
        ("gpus", "gpu.example.com", EXACT_COUNT, 2, ("true",)),
        ("nic", "nic.example.com", EXACT_COUNT, 1, ()),
        ("all", "gpu.example.com", ALL, 0, ())]
    assert c.allocated == (("gpu.example.com", "node-1", "gpu-0"),)
    assert c.allocation_terms[0].matches(NodeInfo("node-1")) and not c.allocation_terms[0].matches(NodeInfo("node-2"))
    assert c.reserved_for == ("u1",) and not c.deleting and c.spec.unmodelled == ()


@pytest.mark.parametrize("request_,devices,what", [
    ({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}, {},
     "request r: prioritized alternatives (firstAvailable)"),
    ({"name": "r", "exactly": {"deviceClassName": "x", "adminAccess": True}}, {}, "request r: admin access"),
    ({"name": "r", "exactly": {"deviceClassName": "x", "capacity": {"requests": {"memory": "1Gi"}}}}, {},
     "request r: consumable capacity"),
    ({"name": "r", "exactly": {"deviceClassName": "x", "tolerations": [{"key": "k", "operator": "Exists"}]}}, {},
     "request r: device taint tolerations"),
    ({"name": "r", "exactly": {"deviceClassName": "x"}},
     {"constraints": [{"requests": ["r"], "matchAttribute": "pci.example.com/root"}]}, "constraints (matchAttribute)"),
])
def test_unmodelled_claim_features_are_named(request_, devices, what):
    assert what in device_claim_info(claim([request_], **devices)).spec.unmodelled


@pytest.mark.parametrize("request_,field", [
    ({"name": "r", "exactly": {"deviceClassName": "x", "count": 0}}, "spec.devices.requests[0].exactly.count"),
    ({"name": "r", "exactly": {"deviceClassName": "x", "count": "2"}}, "spec.devices.requests[0].exactly.count"),
    ({"name": "r", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}},
     "spec.devices.requests[0].exactly.allocationMode"),
    ({"name": 5, "exactly": {}}, "spec.devices.requests[0].name"),
])
def test_invalid_claims_name_the_field(request_, field):
    with pytest.raises(InvalidObject, match="^" + re.escape(field)):
        device_claim_info(claim([request_]))


def test_template_is_read_as_the_claims_made_from_it():
    ns, name, spec = claim_template_info({"metadata": {"namespace": "ns", "name": "one-gpu"}, "spec": {"spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    assert (ns, name) == ("ns", "one-gpu")
    assert [(r.name, r.device_class, r.count) for r in spec.requests] == [("gpu", "gpu.example.com", 1)]
    with pytest.raises(InvalidObject, match=r"^spec.spec.devices.requests\[0\].exactly.count"):
        claim_template_info({"metadata": {}, "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "x", "count": -1}}]}}}})


# -- which devices a request selects, and which signature each counts toward

CLASSES = {"gpu": DeviceClassInfo("gpu", ('device.driver == "gpu.example.com"',)),
           "any": DeviceClassInfo("any"),
           "odd": DeviceClassInfo("odd", ('device.attributes["gpu.example.com"].model.lowerAscii() == "a"',))}


def dev(name, driver="gpu.example.com", model="a100"):
    return Device(driver, "p", name, DeviceView(driver, {driver: {"model": model}}))


def test_class_and_request_selectors_both_apply():
    m = Matcher()
    big = Signature.of(DeviceRequest("r", "gpu", ('device.attributes["gpu.example.com"].model == "h100"',)))
    devices = [dev("a"), dev("h", model="h100"), dev("n", driver="nic.example.com", model="h100")]
    assert m.unchecked(big, CLASSES) == ""
    assert [d.name for d in devices if m.matches(big, CLASSES, d)] == ["h"]
    assert [d.name for d in devices if m.matches(Signature("gpu"), CLASSES, d)] == ["a", "h"]
    assert [d.name for d in devices if m.matches(Signature("any"), CLASSES, d)] == ["a", "h", "n"]


def test_unchecked_signatures_say_why():
    m = Matcher()
    assert m.unchecked(Signature("missing"), CLASSES) == "device class 'missing' not found"
    assert m.unchecked(Signature("odd"), CLASSES) == "CEL function lowerAscii not modelled"
    assert m.unchecked(Signature("gpu", ("foo()",)), CLASSES) == "CEL function foo not modelled"


def test_a_changed_device_is_evaluated_again_and_a_gone_one_forgotten():
    m = Matcher()
    sig = Signature("any", ('device.attributes["gpu.example.com"].model == "h100"',))
    assert not m.matches(sig, CLASSES, dev("x"))
    assert m.matches(sig, CLASSES, dev("x", model="h100"))  # same key, new attributes
    assert not m.matches(sig, CLASSES, dev("x"))
    m.forget([dev("x").key])
    assert m._results == {}


def test_assign_counts_a_shared_device_toward_the_most_specific_signature():
    broad, narrow = Signature("any"), Signature("gpu")
    a, b, c = ("d", "p", "a"), ("d", "p", "b"), ("d", "p", "c")
    out = assign({broad: {a, b, c}, narrow: {b}})
    assert out == {a: broad, b: narrow, c: broad}
    assert assign({}) == {}


@given(st.dictionaries(st.sampled_from([Signature(c, (s,)) for c in "xyz" for s in ("1", "2")]),
                       st.sets(st.integers(0, 12)), max_size=6))
def test_assign_never_counts_a_device_twice_nor_one_not_selected(sel):
    selected = {sig: {("d", "p", str(i)) for i in ids} for sig, ids in sel.items()}
    out = assign(selected)
    assert set(out) == set().union(*selected.values()) if selected else out == {}
    for key, sig in out.items():
        assert key in selected[sig]
    # nested selections: the narrower one keeps all of its devices
    for s1, d1 in selected.items():
        if d1 and all(not (d1 & d2) or d1 < d2 for s2, d2 in selected.items() if s2 != s1):
            assert {k for k, s in out.items() if s == s1} == d1
