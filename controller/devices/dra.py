"""DRA devices as the planner's resources (pure): which devices members' resource claims take,
counted per node like allocatable (issue 17; docs/semantics.md, "Devices (DRA)").

Source: kube-scheduler's DynamicResources plugin (``pkg/scheduler/framework/plugins/dynamicresources``)
and the structured-parameters allocator (``k8s.io/dynamic-resource-allocation/structured``,
KEP-4381), Kubernetes 1.34+ (``resource.k8s.io/v1``). Records come from :mod:`cogate.controller.devices.records`;
:func:`account` computes a pass from scratch, :mod:`cogate.controller.devices.accountant` the same incrementally.

The model, in the planner's terms:

* **Claims of a member.** Each ``spec.resourceClaims`` entry names a ResourceClaim
  (``resourceClaimName``) or a ResourceClaimTemplate: the claim made from it for this pod
  (``status.resourceClaimStatuses``) when it exists, else the template's spec (the claim does not
  exist until the pod does; kube-scheduler waits for it, cogate plans from the template).
* **Device resources.** A request of an unallocated claim asks for ``count`` devices of a
  :class:`~cogate.controller.devices.records.Signature` (device class and selectors). The number of
  published devices a pending signature selects on a node becomes that node's allocatable of a
  *device resource* named after the signature (:func:`resource_name`: ``"gpu.example.com
  devices"``); the member requests ``count`` of it. When the signatures' device sets are
  laminar (any two nested or disjoint: a class and narrower requests within it, or classes
  apart), a device counts toward every signature selecting it and a request of a signature also
  asks for every wider one: the counts are then exactly the allocator's (Hall's condition over a
  laminar family). Otherwise each device counts toward one signature only
  (:func:`~cogate.controller.devices.records.assign`: the most specific): no device is counted twice, so
  never a false fit, but a placement the allocator would find may be called short. The planner's
  resource fit (kube-scheduler NodeResourcesFit's rule) then is the allocator's count, and
  members planned earlier in the same decision take their devices.
* **Devices in use.** A device a claim's ``status.allocation`` names is charged to a pod bound to
  the device's node that reserves the claim (``status.reservedFor``), like its CPU (preemption then frees it with
  the pod); an allocation no bound pod holds (being bound, or kept after its pods left) is room
  *held* on its node (``DeviceAccount.held``, ``PlanningState.set_held``: taken from the free room,
  not from allocatable, so the node's record stays the same). So the free count is what the allocator would find free,
  and "fits the empty cluster" (``ExceedsClusterCapacity``) counts every device.
* **Extended resources backed by DRA** (KEP-5004, beta and on in 1.36): a member's request of an
  extended resource that a DeviceClass backs (its ``extendedResourceName``, or the implicit
  ``deviceclass.resource.kubernetes.io/<class>``) asks for that many devices of the class: the
  class's devices are counted under the extended resource's own name, so a node lacking it in
  allocatable offers its DRA devices, and a node that has it (a device plugin) keeps its own
  amount, as kube-scheduler's ``filterExtendedResources`` decides per node. The claim
  kube-scheduler makes for a bound pod's such request is not charged again (the pod's request
  counts it).
* **allocationMode All**: a request for every matching device of a node gets a resource of its
  own (:func:`resource_name` with ``all_devices``), allocatable 1 on a node that has matching
  devices, taken (charged to a bound pod holding one of them, else out of the allocatable) while
  any of them is allocated; modelled only while no other pending signature selects those devices
  (otherwise unchecked).

Unchecked (named in ``PodInfo.unplanned``; the group is held by default, ``--unchecked-constraints
release`` releases it unplanned): what :mod:`cogate.controller.devices.records` names unmodelled (admin
access, prioritized alternatives, constraints, consumable capacity, partitionable devices, device
taints, ...), a device class that does not exist, a CEL selector the library cannot evaluate, devices
of slices for several nodes (``nodeSelector``, ``allNodes``, per-device node selection), a claim
already allocated while its member is gated (its node is not planned), a claim shared by several
gated members (they must share its node), and ``All`` requests overlapping other requests.
Problems (the member cannot be scheduled now, as kube-scheduler says): a ResourceClaim that does
not exist or is being deleted, a template that does not exist.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cogate.controller.devices.records import (
    ALL,
    EXACT_COUNT,
    IMPLICIT_EXTENDED_PREFIX,
    ClaimSpec,
    Device,
    DeviceClaimInfo,
    DeviceClassInfo,
    Matcher,
    Signature,
    assign,
)
from cogate.controller.model.records import RESOURCE_CLAIMS, PodInfo, ResourceClaimRef

__all__ = ["DeviceInputs", "DeviceAccount", "Selection", "resource_name", "is_device_resource", "account",
           "backed_extended", "EMPTY_ACCOUNT", "SUFFIX", "with_devices",
           # account()'s steps, which the incremental Accountant (devices/accountant.py) runs too
           "Need", "claim_users", "member_need", "Signatures", "signature_key", "count_signatures",
           "allocated_devices", "devices_by_node", "node_devices", "resolve_member", "device_resources"]

#: Every device resource name ends with this (no Kubernetes resource name has a space).
SUFFIX = " devices"


def resource_name(sig: Signature, all_devices: bool = False) -> str:
    """The device resource of ``sig``: ``"<class> devices"``, with ``" [<6 hex>]"`` (a digest of
    the request's own selectors) when the request narrows the class, and ``"all <class> devices
    of a node"`` for ``allocationMode: All``. Not a valid Kubernetes resource name (it has spaces),
    so it never meets a real one; it appears as is in messages."""
    tag = ""
    if sig.selectors:
        tag = " [" + hashlib.sha256("\0".join(sig.selectors).encode()).hexdigest()[:6] + "]"
    if all_devices:
        return f"all {sig.device_class}{SUFFIX} of a node{tag}"
    return f"{sig.device_class}{SUFFIX}{tag}"


def is_device_resource(name: str) -> bool:
    """Whether ``name`` is a device resource of :func:`resource_name`."""
    return " " in name and SUFFIX in name


def backed_extended(classes: Mapping[str, DeviceClassInfo]) -> dict[str, str | None]:
    """Extended resource name -> the DeviceClass that backs it (KEP-5004): each class's
    ``extendedResourceName`` and the implicit ``deviceclass.resource.kubernetes.io/<class>``.
    None when several classes name the same resource (kube-scheduler then takes the one created
    last, which the records do not keep: such a request is unchecked)."""
    out: dict[str, str | None] = {}
    for c in sorted(classes.values(), key=lambda c: c.name):
        out[IMPLICIT_EXTENDED_PREFIX + c.name] = c.name
        if c.extended_resource_name:
            name = c.extended_resource_name
            out[name] = None if name in out and out[name] != c.name else c.name
    return out


@dataclass(frozen=True)
class DeviceInputs:
    """What the DRA informers hold: published ``devices`` (every ResourceSlice's), ``classes``
    (DeviceClassInfo by name), ``claims`` (DeviceClaimInfo by (namespace, name)), ``templates``
    (ClaimSpec of ResourceClaimTemplates by (namespace, name)). ``version``: changes whenever
    ``devices`` or ``classes`` change (:class:`Selection` keys its cache on it); ``claims_version``
    whenever a claim does."""

    devices: Sequence[Device] = ()
    classes: Mapping[str, DeviceClassInfo] = field(default_factory=dict)
    claims: Mapping[tuple[str, str], DeviceClaimInfo] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ClaimSpec] = field(default_factory=dict)
    version: int = 0
    #: Changes whenever a claim changes (0: unknown, the
    #: :class:`~cogate.controller.devices.accountant.Accountant` then reads every claim).
    claims_version: int = 0


@dataclass(frozen=True)
class DeviceAccount:
    """The device resources of one pass: ``allocatable`` node -> device resource -> devices (added
    to the node's allocatable), ``charges`` bound pod uid -> device resource -> devices in use
    (added to the pod's requests), ``resources`` device resource -> its signature, ``held`` node ->
    device resource -> devices allocated to claims no bound pod holds (room taken, not by a pod:
    ``PlanningState.set_held``)."""

    allocatable: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    charges: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    resources: Mapping[str, Signature] = field(default_factory=dict)
    held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


EMPTY_ACCOUNT = DeviceAccount()


class Selection:
    """Which devices each signature selects (device keys), and why a signature is unchecked;
    cached per signature while ``DeviceInputs.version`` stays the same (selectors are evaluated
    by ``matcher``, cached per device)."""

    def __init__(self, matcher: Matcher | None = None) -> None:
        self.matcher = matcher or Matcher()
        self._version: int | None = None
        self._cache: dict[Signature, tuple[frozenset[tuple[str, str, str]], str]] = {}

    def of(self, sig: Signature, inputs: DeviceInputs) -> tuple[frozenset[tuple[str, str, str]], str]:
        """``(keys of the devices sig selects, why it is unchecked or '')``."""
        if self._version != inputs.version:
            self._version = inputs.version
            self._cache.clear()
        hit = self._cache.get(sig)
        if hit is not None:
            return hit
        why = self.matcher.unchecked(sig, inputs.classes)
        keys: set[tuple[str, str, str]] = set()
        if not why:
            for d in inputs.devices:
                if self.matcher.matches(sig, inputs.classes, d):
                    keys.add(d.key)
                    if not why and d.unmodelled:
                        why = f"device {d.name} of pool {d.pool} has {', '.join(d.unmodelled)}"
                    elif not why and not d.node:
                        why = (f"device {d.name} of pool {d.pool} is published for several nodes "
                               "(ResourceSlice nodeSelector or allNodes)")
        hit = self._cache[sig] = (frozenset(keys), why)
        return hit


@dataclass
class Need:
    """What one gated member asks of devices (:func:`member_need`): ``wants`` per claim request,
    ``extended`` per DRA-backed extended resource, and the claims it cannot be planned for
    (``unchecked``) or scheduled with (``problems``), as messages."""

    member: PodInfo
    wants: list[tuple[Signature, str, int]] = field(default_factory=list)  # (signature, mode, count)
    #: DRA-backed extended resources the member requests: (signature, resource name, count).
    extended: list[tuple[Signature, str, int]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _spec_of(ref: ResourceClaimRef, m: PodInfo, inputs: DeviceInputs,
             need: Need) -> tuple[str, ClaimSpec | None, DeviceClaimInfo | None]:
    """(claim name for messages, spec to plan from, the claim when it exists)."""
    if ref.claim:
        c = inputs.claims.get((m.namespace, ref.claim))
        if c is None:
            need.problems.append(f"resourceclaim {ref.claim!r} not found")
            return ref.claim, None, None
        return ref.claim, c.spec, c
    if ref.generated:
        c = inputs.claims.get((m.namespace, ref.generated))
        if c is not None:
            return ref.generated, c.spec, c
    spec = inputs.templates.get((m.namespace, ref.template))
    if spec is None:
        need.problems.append(f"resourceclaimtemplate {ref.template!r} not found")
        return ref.template, None, None
    return f"{ref.name} (from template {ref.template})", spec, None


def claim_users(members: Sequence[PodInfo]) -> dict[tuple[str, str], list[PodInfo]]:
    """Claim (namespace, name) -> the gated members naming it (a claim several share)."""
    users: dict[tuple[str, str], list[PodInfo]] = {}
    for m in members:
        if m.node_name or not m.resource_claims:
            continue
        for ref in m.resource_claims:
            name = ref.claim or ref.generated
            if name:
                users.setdefault((m.namespace, name), []).append(m)
    return users


def _order(p: PodInfo) -> tuple[float, str, str, str]:
    return (p.created, p.namespace, p.name, p.uid)


def member_need(m: PodInfo, inputs: DeviceInputs, ext: Mapping[str, str | None],
                users: Mapping[tuple[str, str], list[PodInfo]]) -> Need | None:
    """What member ``m`` asks of devices (None: nothing; bound members are charged, not planned)."""
    if m.node_name:
        return None
    backed = [(k, v) for k, v in m.requests.items() if v > 0 and k in ext] if ext else []
    if not m.resource_claims and not backed:
        return None
    need = Need(m)
    for k, v in backed:
        cls = ext[k]
        if cls is None:
            need.unchecked.append(f"resource claim for {k}: several device classes name it as their "
                                  "extendedResourceName")
        else:
            need.extended.append((Signature(cls), k, v))
    for ref in m.resource_claims:
        label, spec, claim = _spec_of(ref, m, inputs, need)
        if spec is None:
            continue
        if claim is not None and claim.deleting:
            need.problems.append(f"resourceclaim {label!r} is being deleted")
            continue
        if claim is not None and claim.allocated:
            need.unchecked.append(f"resource claim {label}: allocated already (its node is not planned)")
            continue
        sharers = users.get((m.namespace, claim.name), []) if claim is not None else []
        if len(sharers) > 1:
            other = min((p for p in sharers if p.uid != m.uid), key=_order)
            need.unchecked.append(f"resource claim {label}: shared with member {other.name} "
                                  "(where they meet is not planned)")
            continue
        if spec.unmodelled:
            need.unchecked.append(f"resource claim {label}: {', '.join(spec.unmodelled)}")
            continue
        for r in spec.requests:
            need.wants.append((Signature.of(r), r.mode, r.count))
    return need


@dataclass
class Signatures:
    """The pass's signatures: ``selected`` (device keys of each checked one), ``why`` (unchecked
    ones), ``modes``, ``ext_name`` (signature -> the extended resource it is asked for as),
    ``all_sigs`` (those asked for with ``All``), ``owner`` (device key -> the signatures it counts
    toward), ``supersets`` (signature -> the device resources a request of it asks for).

    When the selected sets are *laminar* (any two nested or disjoint: a class and narrower
    requests within it, or classes apart) a device counts toward every signature selecting it and
    a request asks for its own signature and every one whose set contains it: for a laminar
    family, "each set's demand at most its free devices" is exactly when distinct devices exist
    (Hall's condition reduces to the family's sets), so the counts are exact. Otherwise each
    device counts toward one signature only (:func:`~cogate.controller.devices.records.assign`, the most
    specific): never a false fit, but a placement may be called short."""

    selected: dict[Signature, frozenset[tuple[str, str, str]]]
    why: dict[Signature, str]
    modes: dict[Signature, set[str]]
    ext_name: dict[Signature, str]
    all_sigs: set[Signature]
    owner: dict[tuple[str, str, str], tuple[Signature, ...]]
    supersets: dict[Signature, tuple[Signature, ...]] = field(default_factory=dict)
    laminar: bool = False

    def res(self, sig: Signature) -> str:
        """The device resource an ``ExactCount`` request of ``sig`` counts toward."""
        return self.ext_name.get(sig) or resource_name(sig)


def signature_key(needs: Iterable[Need]) -> frozenset[tuple[Signature, str, str]]:
    """What :func:`count_signatures` reads of the needs: (signature, mode, extended resource or '')."""
    out: set[tuple[Signature, str, str]] = set()
    for n in needs:
        out.update((sig, mode, "") for sig, mode, _ in n.wants)
        out.update((sig, EXACT_COUNT, k) for sig, k, _ in n.extended)
    return frozenset(out)


def count_signatures(key: frozenset[tuple[Signature, str, str]], inputs: DeviceInputs,
                     selection: Selection) -> Signatures:
    """The pass's :class:`Signatures` from :func:`signature_key`'s ``key``: the devices each selects
    (``selection``), ``All`` requests overlapping others unchecked, the laminar test and each
    device's signatures."""
    selected: dict[Signature, frozenset[tuple[str, str, str]]] = {}
    why_sig: dict[Signature, str] = {}
    modes: dict[Signature, set[str]] = {}
    ext_name: dict[Signature, str] = {}
    for sig, mode, k in sorted(key, key=lambda t: (t[0].device_class, t[0].selectors, t[1], t[2])):
        if k:
            ext_name.setdefault(sig, k)
        modes.setdefault(sig, set()).add(mode)
        if sig in selected or sig in why_sig:
            continue
        keys, why = selection.of(sig, inputs)
        if why:
            why_sig[sig] = why
        else:
            selected[sig] = keys
    for sig in [s for s in selected if ALL in modes[s]]:
        if len(modes[sig]) > 1 or any(selected[sig] & keys for s, keys in selected.items() if s != sig):
            why_sig[sig] = "allocationMode All on devices other requests also select"
    for sig in why_sig:
        selected.pop(sig, None)
    all_sigs = {s for s in selected if ALL in modes[s]}
    counted = {s: keys for s, keys in selected.items() if s not in all_sigs}
    order = sorted(counted, key=lambda s: (len(counted[s]), s.device_class, s.selectors))
    laminar = all(not (counted[a] & counted[b]) or counted[a] <= counted[b]
                  for i, a in enumerate(order) for b in order[i + 1:])
    owner: dict[tuple[str, str, str], tuple[Signature, ...]] = {k: (s,) for k, s in assign(
        {s: selected[s] for s in all_sigs}).items()}
    supersets: dict[Signature, tuple[Signature, ...]] = {}
    if laminar:
        for s in order:  # smallest first: a device's signatures from the narrowest out
            for k in counted[s]:
                owner[k] = owner.get(k, ()) + (s,)
            supersets[s] = tuple(b for b in order if counted[s] <= counted[b] and (b == s or counted[s]))
    else:
        for k, s in assign(counted).items():
            owner[k] = (s,)
        supersets = {s: (s,) for s in counted}
    return Signatures(selected, why_sig, modes, ext_name, all_sigs, owner, supersets, laminar)


def allocated_devices(inputs: DeviceInputs) -> dict[tuple[str, str, str], DeviceClaimInfo]:
    """Device key -> the claim whose allocation names it."""
    out: dict[tuple[str, str, str], DeviceClaimInfo] = {}
    for c in inputs.claims.values():
        for key in c.allocated:
            out[key] = c
    return out


def node_devices(node: str, keys: Iterable[tuple[str, str, str]], sigs: Signatures,
               allocated: Mapping[tuple[str, str, str], DeviceClaimInfo], bound: Mapping[str, str],
               ) -> tuple[dict[str, int], dict[str, dict[str, int]], set[str], dict[str, int]]:
    """One node's device resources: ``(allocatable, charges by holder uid, holders read, held)``."""
    at: dict[str, int] = {}
    held: dict[str, int] = {}
    charges: dict[str, dict[str, int]] = {}
    read: set[str] = set()
    busy_all: dict[Signature, str] = {}  # All signature with a device allocated here -> bound holder ('' none)
    for key in keys:
        owned = sigs.owner.get(key)
        if not owned:
            continue
        c = allocated.get(key)
        holders: list[str] = []
        if c is not None:
            read.update(c.reserved_for)
            holders = sorted(u for u in c.reserved_for if bound.get(u) == node)
        for sig in owned:
            if sig in sigs.all_sigs:
                at[resource_name(sig, True)] = 1
                if c is not None and not busy_all.get(sig):
                    busy_all[sig] = holders[0] if holders else ""
                continue
            res = sigs.res(sig)
            at[res] = at.get(res, 0) + 1
            if c is None:
                continue
            if holders and c.extended and not is_device_resource(res):
                pass  # the holder's own extended-resource request counts it (KEP-5004 claim)
            elif holders:
                ch = charges.setdefault(holders[0], {})
                ch[res] = ch.get(res, 0) + 1
            else:
                held[res] = held.get(res, 0) + 1
    for sig, holder in busy_all.items():
        res = resource_name(sig, True)
        if holder:  # held by a bound pod: its "all" is taken while the pod runs
            charges.setdefault(holder, {})[res] = 1
        else:
            held[res] = 1
    return at, charges, read, held


def resolve_member(m: PodInfo, need: Need, sigs: Signatures) -> PodInfo:
    """Member ``m`` with its device requests added (count per device resource, 1 for an ``All``
    request), ``unplanned`` with one entry per unchecked claim in place of ``RESOURCE_CLAIMS``, and
    the claims' problems in ``volume_problems``."""
    requests = dict(m.requests)
    unchecked = list(need.unchecked)
    for sig, mode, count in need.wants:
        why = sigs.why.get(sig)
        if why:
            unchecked.append(f"resource claim of class {sig.device_class}: {why}")
            continue
        if mode == ALL:
            res = resource_name(sig, True)
            requests[res] = requests.get(res, 0) + 1
            continue
        for s in sigs.supersets.get(sig, (sig,)):
            res = sigs.res(s)
            requests[res] = requests.get(res, 0) + count
    for sig, k, _ in need.extended:  # already in the requests, as the pod asks
        why = sigs.why.get(sig)
        if why:
            unchecked.append(f"resource claim for {k} (device class {sig.device_class}): {why}")
    unplanned = tuple(u for u in m.unplanned if u != RESOURCE_CLAIMS) + tuple(dict.fromkeys(unchecked))
    return dataclasses.replace(m, requests=requests, unplanned=unplanned,
                               volume_problems=m.volume_problems + tuple(need.problems))


def devices_by_node(devices: Iterable[Device]) -> dict[str, list[tuple[str, str, str]]]:
    """Node -> the keys of its devices (devices of slices for several nodes left out)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for d in devices:
        if d.node:
            out.setdefault(d.node, []).append(d.key)
    return out


def device_resources(sigs: Signatures) -> dict[str, Signature]:
    """Device resource name -> its signature, for every checked signature of the pass."""
    out: dict[str, Signature] = {}
    for sig in sigs.selected:
        out[resource_name(sig, True) if sig in sigs.all_sigs else sigs.res(sig)] = sig
    return out


def account(members: Iterable[PodInfo], bound: Mapping[str, str], inputs: DeviceInputs,
            selection: Selection) -> tuple[list[PodInfo], DeviceAccount]:
    """Members with their device requests filled in, and the device resources of the nodes and of
    the bound pods (module doc), from scratch
    (:class:`~cogate.controller.devices.accountant.Accountant` gives the same, incrementally).

    ``members``: the labelled pods of a pass (bound ones are returned unchanged: their devices are
    charged through ``charges``); ``bound``: uid -> node of the bound non-terminal pods the planner
    charges (``.get(uid)``; the holders of allocations: a device is charged to a holder bound to its
    node, else held on the node). A member with claims gets ``requests`` plus its device resources,
    ``unplanned`` with :data:`~cogate.controller.model.records.RESOURCE_CLAIMS` replaced by one entry per
    unchecked claim (``"resource claim gpu: device class 'x' not found"``), and ``volume_problems``
    plus the claims' problems. Never raises on well-typed records."""
    members = list(members)
    users = claim_users(members)
    ext = backed_extended(inputs.classes)
    needs = {m.uid: n for m in members if (n := member_need(m, inputs, ext, users)) is not None}
    sigs = count_signatures(signature_key(needs.values()), inputs, selection)
    allocated = allocated_devices(inputs)
    allocatable: dict[str, dict[str, int]] = {}
    charges: dict[str, dict[str, int]] = {}
    held: dict[str, dict[str, int]] = {}
    for node, keys in devices_by_node(inputs.devices).items():
        at, ch, _, hd = node_devices(node, keys, sigs, allocated, bound)
        if at:
            allocatable[node] = at
        if hd:
            held[node] = hd
        charges.update(ch)
    out = [m if (n := needs.get(m.uid)) is None else resolve_member(m, n, sigs) for m in members]
    return out, DeviceAccount(allocatable, charges, device_resources(sigs), held)


def with_devices(resources: Mapping[str, int], devices: Mapping[str, int] | None) -> dict[str, int]:
    """A node's allocatable (or a bound pod's requests) with the device resources ``devices`` in
    place of any earlier ones. A DRA-backed extended resource the record already has (> 0) keeps
    its own amount: a node that has it in allocatable serves it through a device plugin, not DRA
    (kube-scheduler 1.36 DynamicResources ``filterExtendedResources``)."""
    out = {k: v for k, v in resources.items() if not is_device_resource(k)}
    for k, v in (devices or {}).items():
        if is_device_resource(k) or out.get(k, 0) <= 0:
            out[k] = v
    return out
