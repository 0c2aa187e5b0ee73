"""Device pools mid-update (issue 37 kind 8): only the newest generation of complete pools is
counted, as kube-scheduler's allocator (``GatherPools``) does; pools being updated are named.

End to end: tests/e2e/test_devices.py (pools republished or incomplete)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.devices import pools
from cogate.controller.devices.records import Signature, SliceInfo, slice_info
from cogate.controller.model.records import InvalidObject


def raw(name: str, pool: str, generation: int, count: int, devices: list[str], driver: str = "gpu.example.com",
        node: str = "n1") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                     "devices": [{"name": d} for d in devices]}}


def sl(name: str, pool: str, generation: int, count: int, *devices: str, driver: str = "gpu.example.com") -> SliceInfo:
    return slice_info(raw(name, pool, generation, count, list(devices), driver))


def names(u: pools.Usable) -> list[str]:
    return [d.name for d in u.devices]


def test_slice_info_reads_the_pool():
    s = slice_info(raw("s1", "n1", 4, 2, ["gpu-0", "gpu-1"]))
    assert (s.name, s.driver, s.pool, s.generation, s.slice_count) == ("s1", "gpu.example.com", "n1", 4, 2)
    assert [d.name for d in s.devices] == ["gpu-0", "gpu-1"]
    bad = raw("s1", "n1", 1, 0, ["gpu-0"])
    with pytest.raises(InvalidObject, match="spec.pool.resourceSliceCount"):
        slice_info(bad)
    bad["spec"]["pool"].update(resourceSliceCount=1, generation=-1)
    with pytest.raises(InvalidObject, match="spec.pool.generation"):
        slice_info(bad)


@pytest.mark.parametrize("what,slices,usable,updating", [
    ("one complete pool", [sl("a", "p", 1, 1, "g0", "g1")], ["g0", "g1"], []),
    ("two slices, both published", [sl("a", "p", 1, 2, "g0"), sl("b", "p", 1, 2, "g1")], ["g0", "g1"], []),
    ("incomplete: 1 of 2 published", [sl("a", "p", 1, 2, "g0")], [], ["pool p of gpu.example.com (generation 1: "
                                                                       "1 of 2 slices published)"]),
    ("republished, new generation complete: old ignored", [sl("a", "p", 1, 1, "old"), sl("b", "p", 2, 1, "new")],
     ["new"], []),
    ("republished, new generation incomplete", [sl("a", "p", 1, 1, "old"), sl("b", "p", 2, 2, "new")], [],
     ["pool p of gpu.example.com (generation 2: 1 of 2 slices published; 1 older slice ignored)"]),
    ("an empty slice counts toward the pool", [sl("a", "p", 3, 2, "g0"), sl("b", "p", 3, 2)], ["g0"], []),
    ("more slices than it says: not complete", [sl("a", "p", 1, 1, "g0"), sl("b", "p", 1, 1, "g1")], [],
     ["pool p of gpu.example.com (generation 1: 2 of 1 slice published)"]),
    ("pools apart: one updating does not hide the other",
     [sl("a", "p", 1, 2, "g0"), sl("b", "q", 1, 1, "h0")], ["h0"],
     ["pool p of gpu.example.com (generation 1: 1 of 2 slices published)"]),
    ("same pool name, other driver: another pool",
     [sl("a", "p", 1, 1, "g0"), sl("b", "p", 5, 2, "n0", driver="net.example.com")], ["g0"],
     ["pool p of net.example.com (generation 5: 1 of 2 slices published)"]),
])
def test_only_complete_pools_newest_generation_is_usable(what, slices, usable, updating):
    u = pools.usable(slices)
    assert names(u) == usable, what
    assert [x.text for x in u.updating] == updating, what
    assert pools.usable(reversed(slices)) == u  # order of the informer does not matter


@st.composite
def _slices(draw):
    out = []
    for i in range(draw(st.integers(0, 8))):
        pool = draw(st.sampled_from(["p", "q", "r"]))
        gen = draw(st.integers(0, 3))
        count = draw(st.integers(1, 3))
        devs = [f"{pool}-{gen}-{i}-{k}" for k in range(draw(st.integers(0, 2)))]
        out.append(sl(f"s{i}", pool, gen, count, *devs))
    return out


@settings(max_examples=300, deadline=None)
@given(_slices())
def test_property_kube_schedulers_gather_pools(slices):
    """Brute force of GatherPools + allocateOne: a device is usable iff its slice is of its pool's
    newest generation and that generation has exactly resourceSliceCount (of its first slice, by
    name) slices; every pool with devices left out of any generation is either usable or named."""
    u = pools.usable(slices)
    got = {d.name for d in u.devices}
    want = set()
    for p in {s.pool for s in slices}:
        mine = [s for s in slices if s.pool == p]
        top = max(s.generation for s in mine)
        cur = sorted((s for s in mine if s.generation == top), key=lambda s: s.name)
        if len(cur) == cur[0].slice_count:
            want |= {d.name for s in cur for d in s.devices}
        else:
            assert any(x.pool == p for x in u.updating)
    assert got == want
    assert len(u.devices) == len(got)  # no device twice


def test_updating_note_names_only_pools_the_group_asks_for():
    u = pools.usable([sl("a", "p", 2, 2, "gpu-0"), sl("b", "q", 1, 2, "nic-0", driver="net.example.com")])
    gpu, nic = Signature("gpu"), Signature("nic")

    def selects(sig, d):
        return (sig.device_class == "gpu") == (d.driver == "gpu.example.com")

    assert pools.updating_note(u.updating, [gpu], selects) == (
        "device pools being updated, kube-scheduler allocates none of their devices until a pool is complete: "
        "pool p of gpu.example.com (generation 2: 1 of 2 slices published)")
    assert "net.example.com" in pools.updating_note(u.updating, [nic], selects)
    assert pools.updating_note(u.updating, [], selects) == ""
    many = pools.usable([sl(f"s{i}", f"p{i}", 1, 2, f"g{i}") for i in range(5)])
    assert pools.updating_note(many.updating, [gpu], selects).endswith(" and 2 more")
