"""Resource pools mid-update (pure): which published devices kube-scheduler can allocate now, and
which pools are being updated (issue 37 kind 8; docs/semantics.md, "Devices (DRA)").

Source: kube-scheduler's structured-parameters allocator, ``k8s.io/dynamic-resource-allocation``
``structured/internal/stable/pools_stable.go`` (``GatherPools``, ``addSlice``,
``checkSlicesInPool``) and ``allocator_stable.go`` (``allocateOne``: "We don't allocate devices
from invalid or incomplete pools"), Kubernetes 1.36. A pool is the ResourceSlices of one
(driver, ``spec.pool.name``):

* only the slices of the pool's **newest** ``spec.pool.generation`` count: a driver that
  republishes a pool raises the generation, and the older slices are out of date the moment one
  newer slice exists (``addSlice``: "Newer, replaces all old slices"; ``checkSlicesInPool``: the
  current generation is obsolete once any slice of a newer one exists);
* the pool is **complete** when the newest generation has as many slices as its
  ``spec.pool.resourceSliceCount``; kube-scheduler allocates nothing from an incomplete pool (and a
  request for ``All`` devices fails while any pool is incomplete).

So the planner counts the devices of complete pools' newest slices only (:func:`usable`); a pool
that is not complete is **being updated** (:class:`PoolUpdate`), and a waiting group that asks
for devices such a pool publishes is told so (:func:`updating_note`). Counting a stale or
incomplete pool's devices would release a gang pinned to nodes where kube-scheduler then cannot
allocate: half-placed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cogate.controller.devices.records import Device, SliceInfo, Signature

__all__ = ["PoolUpdate", "Usable", "usable", "updating_note", "NOTE_POOLS"]

#: The most pools a note names (the rest counted).
NOTE_POOLS = 3


@dataclass(frozen=True)
class PoolUpdate:
    """A pool kube-scheduler allocates nothing from now: ``published`` of ``expected`` slices
    (``resourceSliceCount``) of its newest ``generation`` exist; ``older``: slices of earlier
    generations still published (out of date); ``devices``: every device its slices publish (of
    any generation: which requests the pool concerns)."""

    driver: str
    pool: str
    generation: int
    published: int
    expected: int
    older: int = 0
    devices: tuple[Device, ...] = ()

    @property
    def text(self) -> str:
        """``"pool n1 of gpu.example.com (generation 3: 1 of 2 slices published; 1 older slice ignored)"``."""
        old = f"; {self.older} older slice{'s' if self.older != 1 else ''} ignored" if self.older else ""
        return (f"pool {self.pool} of {self.driver} (generation {self.generation}: {self.published} of "
                f"{self.expected} slice{'s' if self.expected != 1 else ''} published{old})")


@dataclass(frozen=True)
class Usable:
    """:func:`usable`'s answer: the ``devices`` kube-scheduler can allocate from (newest
    generation of complete pools) and the pools being ``updating`` (sorted by driver, pool)."""

    devices: tuple[Device, ...]
    updating: tuple[PoolUpdate, ...] = ()


def usable(slices: Iterable[SliceInfo]) -> Usable:
    """The devices of ``slices`` that kube-scheduler can allocate, pool by pool (module doc):
    only the newest generation's slices, and only when that generation has ``resourceSliceCount``
    slices (more slices than it says is not complete either: kube-scheduler's test is
    ``len == resourceSliceCount``, read from the first slice). Deterministic: devices in (driver, pool, slice name) order."""
    pools: dict[tuple[str, str], list[SliceInfo]] = {}
    for s in slices:
        pools.setdefault((s.driver, s.pool), []).append(s)
    devices: list[Device] = []
    updating: list[PoolUpdate] = []
    for (driver, pool), members in sorted(pools.items()):
        newest = max(s.generation for s in members)
        current = sorted((s for s in members if s.generation == newest), key=lambda s: s.name)
        expected = current[0].slice_count
        if len(current) == expected:
            devices.extend(d for s in current for d in s.devices)
            continue
        updating.append(PoolUpdate(driver, pool, newest, len(current), expected, len(members) - len(current),
                                   tuple(d for s in sorted(members, key=lambda s: s.name) for d in s.devices)))
    return Usable(tuple(devices), tuple(updating))


def updating_note(updating: Iterable[PoolUpdate], asked: Iterable[Signature],
                  selects: Callable[[Signature, Device], bool]) -> str:
    """Message part naming the pools being updated whose devices (any generation) some signature
    in ``asked`` selects (``selects(sig, device)``: the devices room's matcher): ``"device pools
    being updated, kube-scheduler allocates none of their devices until a pool is complete: pool n1
    of gpu.example.com (generation 3: 1 of 2 slices published)"``; ``""`` when none concerns
    them. At most :data:`NOTE_POOLS` named, the rest counted."""
    asked = list(asked)
    hit = [u for u in updating if any(selects(sig, d) for sig in asked for d in u.devices)]
    if not hit:
        return ""
    shown = ", ".join(u.text for u in hit[:NOTE_POOLS])
    more = f" and {len(hit) - NOTE_POOLS} more" if len(hit) > NOTE_POOLS else ""
    return ("device pools being updated, kube-scheduler allocates none of their devices until a pool is "
            f"complete: {shown}{more}")
