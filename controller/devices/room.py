"""The devices room (shell): DRA devices in the planning state (issue 17; the model is
:mod:`cogate.controller.devices.dra`, pure).

Reads four informers (``resource.k8s.io/v1``: ResourceSlices, DeviceClasses, ResourceClaims,
ResourceClaimTemplates; read only) and, once per pass, before planning:

* fills in the device requests of the pass's members (:func:`cogate.controller.devices.dra.account`);
* puts the device resources into the planning state: each node's allocatable gets its device
  counts, each bound pod holding an allocation gets the devices as requests; only nodes and pods
  whose device resources changed are given again (``PlanningState.upsert_node`` / ``upsert_pod``),
  and the node and bound-pod handlers overlay the last account on every delta (:meth:`node`,
  :meth:`bound_pod`).

Without the informers (an API server that does not serve ``resource.k8s.io/v1``, before Kubernetes
1.34) the room does nothing: members' claims stay unchecked (``PodInfo.unplanned``).
Not thread-safe: the reconciler calls it under its planning lock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from cogate.controller.devices import dra, pools
from cogate.controller.devices.accountant import Accountant
from cogate.controller.devices.records import Device, Signature
from cogate.controller.kube.informer import Informer
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, with_note
from cogate.controller.planning.planstate import PlanningState

__all__ = ["Devices", "API_GROUP", "API_VERSION", "RESOURCES"]

log = logging.getLogger("cogate.controller.devices.records")

API_GROUP = "resource.k8s.io"
API_VERSION = "v1"
#: The resources the room watches (plural -> scope).
RESOURCES = {"resourceslices": "Cluster", "deviceclasses": "Cluster", "resourceclaims": "Namespaced",
             "resourceclaimtemplates": "Namespaced"}


class _Bound:
    """``bound.get(uid)``: the node of a bound, non-terminal pod the bound-pods informer holds, else None."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer

    def get(self, uid: str) -> str | None:
        p = self._informer.get(uid)
        return p.node_name if p is not None and p.bound and not p.terminal else None


class Devices:
    """DRA devices for the planner (module doc). ``slices`` (records:
    :class:`~cogate.controller.devices.records.SliceInfo`; only complete pools' newest slices are
    counted, :func:`cogate.controller.devices.pools.usable`), ``classes`` (DeviceClassInfo by name), ``claims``
    (DeviceClaimInfo by (namespace, name)), ``templates`` ((namespace, name, ClaimSpec) by
    (namespace, name)); ``nodes`` and ``bound``: the reconciler's informers (NodeInfo by name,
    PodInfo by uid). All four DRA informers or none."""

    def __init__(self, slices: Informer | None, classes: Informer | None, claims: Informer | None,
                 templates: Informer | None, nodes: Informer, bound: Informer) -> None:
        self.enabled = None not in (slices, classes, claims, templates)
        self._slices, self._classes, self._claims, self._templates = slices, classes, claims, templates
        self._nodes, self._bound = nodes, bound
        self.accountant = Accountant()
        self.selection = self.accountant.selection
        #: The account last put into the planning state.
        self.account: dra.DeviceAccount = dra.EMPTY_ACCOUNT
        #: Members of the last pass whose record the account changed (device requests), by uid.
        self._resolved: dict[str, PodInfo] = {}
        self._version = 0
        self._claims_version = 1
        #: Claims the claims informer reported since the last pass (None: read every claim again).
        self._claims_changed: set[tuple[str, str]] | None = None
        #: Pods the bound-pods informer reported since the last pass (holders of allocations).
        self._holders_changed: set[str] = set()
        self._skipped = False
        self._devices: tuple[Device, ...] = ()
        #: Pools kube-scheduler allocates nothing from now (mid-update), as of the last read.
        self.updating: tuple[pools.PoolUpdate, ...] = ()
        self._devices_version = -1
        self._class_map: dict = {}
        self._claim_map: dict = {}
        self._template_map: dict = {}
        self._read_claims_version = -1
        if self.enabled:
            assert slices is not None and classes is not None and claims is not None and templates is not None
            slices.add_handler(self._bump)
            classes.add_handler(self._bump)
            claims.add_handler(self._claim_changed)
            templates.add_handler(self._template_changed)
            bound.add_handler(self._bound_changed)

    def _bump(self, kind: str, old: Any, new: Any) -> None:
        self._version += 1

    def _claim_changed(self, kind: str, old: Any, new: Any) -> None:
        c = new if new is not None else old
        if c is not None and self._claims_changed is not None:
            self._claims_changed.add((c.namespace, c.name))
        self._claims_version += 1

    def _template_changed(self, kind: str, old: Any, new: Any) -> None:
        self._claims_changed = None  # every member's needs read again
        self._claims_version += 1

    def _bound_changed(self, kind: str, old: Any, new: Any) -> None:
        p = new if new is not None else old
        if p is not None:
            self._holders_changed.add(p.uid)

    def inputs(self) -> dra.DeviceInputs:
        """What the informers hold now; each part is read again only after its informer reported a
        change (the versions are read before the caches: a change racing the read is seen next pass)."""
        assert self._slices is not None and self._classes is not None
        assert self._claims is not None and self._templates is not None
        version, claims_version = self._version, self._claims_version
        if self._devices_version != version:
            found = pools.usable(self._slices.snapshot())
            if found.updating != self.updating:
                log.info("device pools being updated (not counted): %s",
                         ", ".join(u.text for u in found.updating) or "none")
            self._devices, self.updating = found.devices, found.updating
            self._class_map = self._classes.snapshot_map()
            self._devices_version = version
            keys = {d.key for d in self._devices}
            self.selection.matcher.forget([k for k in self.selection.matcher.keys() if k not in keys])
        if self._read_claims_version != claims_version:
            self._claim_map = self._claims.snapshot_map()
            self._template_map = {(ns, name): spec for ns, name, spec in self._templates.snapshot()}
            self._read_claims_version = claims_version
        return dra.DeviceInputs(self._devices, self._class_map, self._claim_map, self._template_map, version,
                                claims_version)

    def resolve(self, members: Iterable[PodInfo], planning: PlanningState | None) -> list[PodInfo]:
        """``members`` with device requests filled in; the planning state (None for a scripted ``decide``) gets
        the new device resources of the nodes and bound pods whose account changed."""
        members = list(members)
        if not self.enabled:
            return members
        # What changed since the last pass, taken before the caches are read: a change racing the
        # read is in the next pass's sets (reading it twice is harmless, missing it is not).
        holders, self._holders_changed = self._holders_changed, set()
        claims, self._claims_changed = self._claims_changed, set()
        inputs = self.inputs()
        ext = dra.backed_extended(inputs.classes)
        asks = any(m.resource_claims or (ext and not m.node_name and any(k in ext for k in m.requests))
                   for m in members)
        if not asks and not self.account.allocatable and not self.account.charges and not self.account.held:
            self._skipped = True  # the changes taken above were not given to the accountant
            return members
        if self._skipped:
            holders, claims, self._skipped = None, None, False  # read everything again once
        resolved, account = self.accountant.account(members, _Bound(self._bound), inputs, holders, claims)
        self._resolved = {r.uid: r for m, r in zip(members, resolved) if r is not m}
        old, self.account = self.account, account
        if planning is not None:
            for name in self.accountant.changed_nodes:
                if old.allocatable.get(name) != account.allocatable.get(name):
                    n = self._nodes.get(name)
                    if n is not None:
                        planning.upsert_node(self.node(n))
                planning.set_held(name, account.held.get(name))
            for uid in self.accountant.changed_holders:
                p = self._bound.get(uid)
                if p is not None and p.bound and not p.terminal:
                    planning.upsert_pod(self.bound_pod(p))
        return resolved

    def explain(self, verdict: GroupVerdict, request: GroupRequest) -> GroupVerdict:
        """``verdict`` with the pools being updated named (:func:`~cogate.controller.devices.pools.updating_note`)
        when the group waits (held, or new members of a standing release left gated) and its
        members ask for devices such a pool publishes; ``verdict`` itself otherwise."""
        if not self.updating or (verdict.outcome.releases and not verdict.waiting):
            return verdict
        asked: set[Signature] = set()
        for m in request.members:
            if not m.bound:
                asked.update(sig for k, sig in self.account.resources.items() if k in m.requests)
        if not asked:
            return verdict
        classes = self._class_map
        matcher = self.selection.matcher

        def selects(sig: Signature, d: Device) -> bool:
            return not matcher.unchecked(sig, classes) and matcher.matches(sig, classes, d)

        return with_note(verdict, pools.updating_note(self.updating, sorted(asked, key=repr), selects))

    def node(self, n: NodeInfo) -> NodeInfo:
        """``n`` with its device resources of the last account (unchanged when it has none), for
        the planning state (which takes the held devices from the free room: ``set_held``)."""
        devices = self.account.allocatable.get(n.name)
        if not devices and not any(dra.is_device_resource(k) for k in n.allocatable):
            return n
        return dataclasses.replace(n, allocatable=dra.with_devices(n.allocatable, devices))

    def bound_pod(self, p: PodInfo) -> PodInfo:
        """``p`` with the devices it holds in the last account as requests (unchanged when none)."""
        devices = self.account.charges.get(p.uid)
        if not devices and not any(dra.is_device_resource(k) for k in p.requests):
            return p
        return dataclasses.replace(p, requests=dra.with_devices(p.requests, devices))

    def nodes(self, nodes: Iterable[NodeInfo]) -> list[NodeInfo]:
        """Each node with its device resources less the held ones: what a from-scratch room over
        the informers' nodes and bound pods must read (a scripted ``decide``, the release guard,
        the after-release checks)."""
        out = []
        for n in nodes:
            n = self.node(n)
            held = self.account.held.get(n.name)
            if held:
                n = dataclasses.replace(n, allocatable={k: v - held.get(k, 0) for k, v in n.allocatable.items()})
            out.append(n)
        return out

    def bound_pods(self, pods: Iterable[PodInfo]) -> list[PodInfo]:
        """:meth:`bound_pod` of each."""
        return [self.bound_pod(p) for p in pods]

    def member(self, m: PodInfo | None) -> PodInfo | None:
        """The member as the last pass planned it (with its device requests), when that pass
        changed it and the record is still the one cached; else ``m``."""
        if m is None:
            return None
        r = self._resolved.get(m.uid)
        return r if r is not None and r.resource_version == m.resource_version else m

