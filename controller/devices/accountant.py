"""The device account kept between passes (pure): :func:`cogate.controller.devices.dra.account`'s
result, recomputing only what changed (issue 17; docs/semantics.md, "Devices (DRA)").

:meth:`Accountant.account` runs the steps of the from-scratch ``account`` in order, each over
what changed since the call before (the numbered steps, like kube-scheduler's
``Evaluator.Preempt``):

1. **needs**: what each member asks of devices (:func:`~cogate.controller.devices.dra.member_need`),
   re-read only for members whose record, claims, templates or sharers changed;
2. **signatures**: the pass's signatures and the devices counting toward each
   (:func:`~cogate.controller.devices.dra.count_signatures`); a change recounts every node;
3. **allocations**: device key -> the claim whose allocation names it; only the changed claims'
   devices move;
4. **nodes to recount**: those of the moved devices and of the holders whose bound state changed;
5. **recount** them (:func:`~cogate.controller.devices.dra.node_devices`), noting the nodes and
   holders whose device resources differ;
6. **account and members**: the :class:`~cogate.controller.devices.dra.DeviceAccount` and the
   members with their device requests (:func:`~cogate.controller.devices.dra.resolve_member`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from cogate.controller.devices.dra import (
    EMPTY_ACCOUNT,
    DeviceAccount,
    DeviceInputs,
    Need,
    Selection,
    Signatures,
    allocated_devices,
    backed_extended,
    claim_users,
    count_signatures,
    device_resources,
    devices_by_node,
    member_need,
    node_devices,
    resolve_member,
    signature_key,
)
from cogate.controller.devices.records import DeviceClaimInfo, Signature
from cogate.controller.model.records import PodInfo

__all__ = ["Accountant"]

#: A device's key: (driver, pool, device) (:attr:`~cogate.controller.devices.records.Device.key`).
DeviceKey = tuple[str, str, str]
#: One node's device resources: (allocatable, charges by holder uid, holders read, held)
#: (:func:`~cogate.controller.devices.dra.node_devices`).
NodePart = tuple[dict[str, int], dict[str, dict[str, int]], set[str], dict[str, int]]


class Accountant:
    """:func:`~cogate.controller.devices.dra.account` kept between passes: the same result
    (property-tested), recomputing only what changed. Per member, its needs while the member
    record, the claims and templates it names and its sharers are the same objects; the signatures
    and device assignment while the pass's signatures and ``DeviceInputs.version`` are the same;
    per node, its device resources while the assignment, the allocations of its devices
    (``DeviceInputs.claims_version``) and the bound state of their holders (``holders_changed``)
    are the same. After each call, ``changed_nodes`` and ``changed_holders`` name the nodes whose
    allocatable or held devices and the bound pods whose charges differ from the call before. Not
    thread-safe."""

    def __init__(self, selection: Selection | None = None) -> None:
        self.selection = selection or Selection()
        self.changed_nodes: set[str] = set()
        self.changed_holders: set[str] = set()
        # 1) needs
        self._members: list[PodInfo] = []
        self._versions: tuple[int, int] | None = None
        self._needs_by_uid: dict[str, Need] = {}
        self._need_keys: dict[str, tuple[Any, ...]] = {}
        self._claim_members: dict[tuple[str, str], set[str]] = {}
        # 2) signatures
        self._sig_needs: Any = None
        self._sig_key: Any = None
        self._sigs: Signatures | None = None
        self._devices_version: int | None = None
        self._by_node: dict[str, list[DeviceKey]] = {}
        self._node_of: dict[DeviceKey, str] = {}
        # 3) allocations
        self._claims_version: int | None = None
        self._allocated: dict[DeviceKey, DeviceClaimInfo] = {}
        self._claim_objs: Mapping[tuple[str, str], DeviceClaimInfo] = {}
        # 5) per node
        self._nodes: dict[str, NodePart] = {}
        self._holder_nodes: dict[str, set[str]] = {}
        self._allocatable: dict[str, dict[str, int]] = {}
        self._held: dict[str, dict[str, int]] = {}
        self._charges: dict[str, dict[str, int]] = {}
        # 6) account and members
        self._account = EMPTY_ACCOUNT
        self._resources_sigs: Any = None
        self._resources_cache: dict[str, Signature] = {}
        self._outs: dict[str, tuple[Need, Signatures, PodInfo]] = {}

    def account(self, members: Iterable[PodInfo], bound: Mapping[str, str], inputs: DeviceInputs,
                holders_changed: Collection[str] | None = None,
                claims_changed: Collection[tuple[str, str]] | None = None) -> tuple[list[PodInfo], DeviceAccount]:
        """:func:`~cogate.controller.devices.dra.account`. ``holders_changed``: uids of pods whose
        bound state may have changed since the last call (None: any); ``claims_changed``:
        (namespace, name) of the claims that changed since (None: any, templates included).
        ``inputs.claims_version`` must change whenever a claim or template does (0: unknown, every
        claim is read), ``inputs.version`` whenever a device or class does."""
        members = list(members)
        needs = self._needs(members, inputs, claims_changed)  # 1
        recount_all = self._count_signatures(needs, inputs)  # 2
        moved = self._allocations(inputs, claims_changed)  # 3
        nodes = self._nodes_to_recount(recount_all, moved, holders_changed)  # 4
        self.changed_nodes, self.changed_holders = self._recount(nodes, bound)  # 5
        account = self._account_now()  # 6
        return self._resolve(members, needs), account

    # -- 1) needs ----------------------------------------------------------------------------------

    def _needs(self, members: list[PodInfo], inputs: DeviceInputs,
               claims_changed: Collection[tuple[str, str]] | None) -> dict[str, Need]:
        """Step 1: member uid -> its :class:`~cogate.controller.devices.dra.Need` (members asking
        nothing of devices left out); the last call's object when nothing it reads changed."""
        versions = (inputs.version, inputs.claims_version)
        same_members = len(members) == len(self._members) and all(a is b for a, b in zip(members, self._members))
        if same_members and inputs.claims_version and versions == self._versions:
            return self._needs_by_uid
        if (same_members and inputs.claims_version and claims_changed is not None and self._versions is not None
                and versions[0] == self._versions[0]):
            return self._renew_needs(members, inputs, claims_changed, versions)
        return self._read_needs(members, inputs, versions)

    def _renew_needs(self, members: list[PodInfo], inputs: DeviceInputs,
                     claims_changed: Collection[tuple[str, str]], versions: tuple[int, int]) -> dict[str, Need]:
        """The same members, only the claims in ``claims_changed`` changed: only their members'
        needs may differ."""
        touched = {u for k in claims_changed for u in self._claim_members.get(k, ())}
        self._versions = versions
        if not touched:
            return self._needs_by_uid
        needs = dict(self._needs_by_uid)
        keys = dict(self._need_keys)
        users = claim_users(self._members)
        ext = backed_extended(inputs.classes)
        for m in members:
            if m.uid not in touched:
                continue
            need = member_need(m, inputs, ext, users)
            keys[m.uid] = self._need_key(m, inputs, users)
            if need is None:
                needs.pop(m.uid, None)
            else:
                needs[m.uid] = need
        self._need_keys, self._needs_by_uid = keys, needs
        return needs

    def _read_needs(self, members: list[PodInfo], inputs: DeviceInputs, versions: tuple[int, int]) -> dict[str, Need]:
        """Every member's needs, each kept from the last call while what it reads
        (:meth:`_need_key`) is the same."""
        users = claim_users(members)
        ext = backed_extended(inputs.classes)
        needs: dict[str, Need] = {}
        keys: dict[str, tuple[Any, ...]] = {}
        for m in members:
            if m.node_name or (not m.resource_claims and not (ext and any(k in ext for k in m.requests))):
                continue
            key = self._need_key(m, inputs, users)
            old = self._need_keys.get(m.uid)
            need = self._needs_by_uid.get(m.uid) if old is not None and len(old) == len(key) and all(
                a is b or a == b for a, b in zip(old, key)) else None
            if need is None:
                need = member_need(m, inputs, ext, users)
            keys[m.uid] = key
            if need is not None:
                needs[m.uid] = need
        self._members, self._versions, self._need_keys, self._needs_by_uid = members, versions, keys, needs
        claim_members: dict[tuple[str, str], set[str]] = {}
        for m in members:
            for r in m.resource_claims if not m.node_name else ():
                claim_members.setdefault((m.namespace, r.claim or r.generated), set()).add(m.uid)
        self._claim_members = claim_members
        return needs

    @staticmethod
    def _need_key(m: PodInfo, inputs: DeviceInputs, users: Mapping[tuple[str, str], list[PodInfo]]) -> tuple[Any, ...]:
        """What :func:`~cogate.controller.devices.dra.member_need` reads for ``m``: the record, the
        devices' version, and per claim the claim, the template and the sharers."""
        return (m, inputs.version, *(
            (inputs.claims.get((m.namespace, r.claim or r.generated)),
             inputs.templates.get((m.namespace, r.template)) if r.template else None,
             tuple(p.uid for p in users.get((m.namespace, r.claim or r.generated), ())))
            for r in m.resource_claims))

    # -- 2) signatures -----------------------------------------------------------------------------

    def _count_signatures(self, needs: dict[str, Need], inputs: DeviceInputs) -> bool:
        """Step 2: the pass's signatures and the devices per node, recomputed when the needs'
        signatures or ``inputs.version`` changed. True when recomputed (every node is recounted)."""
        sig_key = signature_key(needs.values()) if needs is not self._sig_needs else self._sig_key
        self._sig_needs = needs
        if self._devices_version != inputs.version:
            self._by_node = devices_by_node(inputs.devices)
            self._node_of = {k: n for n, keys in self._by_node.items() for k in keys}
        if sig_key == self._sig_key and self._devices_version == inputs.version and self._sigs is not None:
            return False
        self._sigs = count_signatures(sig_key, inputs, self.selection)
        self._sig_key = sig_key
        self._devices_version = inputs.version
        return True

    # -- 3) allocations ----------------------------------------------------------------------------

    def _allocations(self, inputs: DeviceInputs, claims_changed: Collection[tuple[str, str]] | None) -> set[DeviceKey]:
        """Step 3: device key -> the claim allocating it, kept while ``inputs.claims_version`` is
        the same (and known); only the claims in ``claims_changed`` are re-read when given. Returns
        the keys of the devices whose claim changed."""
        moved: set[DeviceKey] = set()
        if self._claims_version != inputs.claims_version or not inputs.claims_version:
            if claims_changed is not None and self._claims_version is not None and inputs.claims_version:
                allocated = self._allocated  # only the changed claims' allocations move
                for ck in claims_changed:
                    old_c, new_c = self._claim_objs.get(ck), inputs.claims.get(ck)
                    for k in old_c.allocated if old_c is not None else ():
                        if allocated.get(k) is old_c:
                            del allocated[k]
                            moved.add(k)
                    for k in new_c.allocated if new_c is not None else ():
                        allocated[k] = new_c
                        moved.add(k)
            else:
                allocated = allocated_devices(inputs)
                moved = {k for k in {*allocated, *self._allocated} if allocated.get(k) is not self._allocated.get(k)}
            self._allocated, self._claims_version = allocated, inputs.claims_version
        self._claim_objs = inputs.claims
        return moved

    # -- 4) nodes to recount -----------------------------------------------------------------------

    def _nodes_to_recount(self, recount_all: bool, moved: set[DeviceKey],
                          holders_changed: Collection[str] | None) -> set[str]:
        """Step 4: every node when the signatures changed or any holder may have; else the nodes of
        the ``moved`` devices and those the changed holders hold devices on."""
        if recount_all or holders_changed is None:
            return set(self._by_node) | set(self._nodes)
        nodes = {self._node_of[k] for k in moved if k in self._node_of}
        for u in holders_changed:
            nodes.update(self._holder_nodes.get(u, ()))
        return nodes

    # -- 5) recount --------------------------------------------------------------------------------

    def _recount(self, nodes: Iterable[str], bound: Mapping[str, str]) -> tuple[set[str], set[str]]:
        """Step 5: each node's device resources again; returns ``(nodes whose allocatable or held
        devices changed, holders whose charges changed)``."""
        changed_nodes: set[str] = set()
        changed_holders: set[str] = set()
        empty: NodePart = ({}, {}, set(), {})
        for node in nodes:
            old = self._nodes.get(node, empty)
            keys = self._by_node.get(node)
            new = node_devices(node, keys, self._sigs, self._allocated, bound) if keys else empty
            if new == old:
                continue
            if new[0] != old[0] or new[3] != old[3]:
                changed_nodes.add(node)
                for target, part in ((self._allocatable, new[0]), (self._held, new[3])):
                    if part:
                        target[node] = part
                    else:
                        target.pop(node, None)
            changed_holders.update(self._store_charges(node, old, new))
            if keys:
                self._nodes[node] = new
            else:
                self._nodes.pop(node, None)
        return changed_nodes, changed_holders

    def _store_charges(self, node: str, old: NodePart, new: NodePart) -> set[str]:
        """One recounted node's charges by holder, and which holders read it; returns the holders
        whose charges changed."""
        changed: set[str] = set()
        for u in old[1]:
            if self._charges.get(u) == old[1][u] and new[1].get(u) != old[1][u]:
                del self._charges[u]
                changed.add(u)
        for u, ch in new[1].items():
            if self._charges.get(u) != ch:
                self._charges[u] = ch
                changed.add(u)
        for u in old[2] - new[2]:
            held = self._holder_nodes.get(u)
            if held is not None:
                held.discard(node)
                if not held:
                    del self._holder_nodes[u]
        for u in new[2]:
            self._holder_nodes.setdefault(u, set()).add(node)
        return changed

    # -- 6) account and members --------------------------------------------------------------------

    def _account_now(self) -> DeviceAccount:
        """Step 6: the account, a new object only when a node, a holder or the resources changed."""
        resources = self._resources_of(self._sigs)
        if self.changed_nodes or self.changed_holders or self._account.resources is not resources:
            self._account = DeviceAccount(dict(self._allocatable), dict(self._charges), resources, dict(self._held))
        return self._account

    def _resolve(self, members: list[PodInfo], needs: Mapping[str, Need]) -> list[PodInfo]:
        """Step 6: the members with their device requests, each kept while its need and the
        signatures are the same objects."""
        sigs = self._sigs
        out: list[PodInfo] = []
        outs: dict[str, tuple[Need, Signatures, PodInfo]] = {}
        for m in members:
            need = needs.get(m.uid)
            if need is None:
                out.append(m)
                continue
            hit = self._outs.get(m.uid)
            if hit is not None and hit[0] is need and hit[1] is sigs:
                r = hit[2]
            else:
                r = resolve_member(m, need, sigs)
            outs[m.uid] = (need, sigs, r)
            out.append(r)
        self._outs = outs
        return out

    def _resources_of(self, sigs: Signatures) -> dict[str, Signature]:
        if self._resources_sigs is not sigs:
            self._resources_sigs, self._resources_cache = sigs, device_resources(sigs)
        return self._resources_cache
