"""Dynamic Resource Allocation objects as the planner reads them (pure): ResourceSlices, DeviceClasses,
ResourceClaims and ResourceClaimTemplates (``resource.k8s.io/v1``, GA in Kubernetes 1.34).

Source: kubernetes/api ``resource/v1/types.go`` and kube-scheduler's structured-parameters allocator
(``k8s.io/dynamic-resource-allocation/structured``). This module turns API JSON into plain records;
:class:`Matcher` says which devices a request's :class:`Signature` selects and :func:`assign` counts
each device toward one signature; :mod:`cogate.controller.devices.dra` builds the accounting on them (which
free devices of which node a member's requests take) and :mod:`cogate.controller.devices.room` feeds
it from the informers.

* A ResourceSlice publishes ``spec.devices`` of ``spec.driver`` in pool ``spec.pool.name``, for one
  node (``spec.nodeName``), for the nodes a ``spec.nodeSelector`` selects, for every node
  (``spec.allNodes``), or per device (``spec.perDeviceNodeSelection``: each device names its own).
  A device's attributes are keyed ``domain/name``; a name without a domain is in the driver's
  domain (``model`` of driver ``gpu.example.com`` is ``device.attributes["gpu.example.com"].model``
  in CEL, :mod:`cogate.controller.devices.cel`).
* A DeviceClass's ``spec.selectors`` (CEL) apply to every request of that class;
  ``spec.extendedResourceName`` (KEP-5004) lets pods ask for devices of the class as an extended
  resource (``example.com/gpu: 1``).
* A ResourceClaim's ``spec.devices.requests`` ask for ``exactly.count`` devices (or ``All``
  matching ones) of ``exactly.deviceClassName`` passing ``exactly.selectors``; its
  ``status.allocation.devices.results`` name the devices kube-scheduler allocated
  (``driver``, ``pool``, ``device``).

What a record cannot express is kept as text in ``unmodelled`` (partitionable devices that consume
shared counters, consumable capacity, admin access, prioritized alternatives (``firstAvailable``),
``matchAttribute`` constraints, device taints, per-device node selection, binding conditions): the
planner names a member with such a claim as unchecked rather than guess.
Quantities are exact (:class:`~cogate.controller.devices.cel.Quantity`). Every parser raises
:class:`~cogate.controller.model.records.InvalidObject` naming the field of a malformed object.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cogate.controller.devices.cel import DeviceView, Quantity, Semver, compile_selector
from cogate.controller.model.constraints import node_selector_terms
from cogate.controller.model.readers import boolean, integer, mapping, mappings, sections, text
from cogate.controller.model.records import (
    InvalidObject,
    NodeSelectorTerm,
)

__all__ = ["Device", "SliceInfo", "slice_info", "DeviceClassInfo", "DeviceRequest", "ClaimSpec", "DeviceClaimInfo",
           "slice_devices",
           "device_class_info", "device_claim_info", "claim_template_info", "Signature", "Matcher", "assign", "ALL",
           "EXACT_COUNT", "EXTENDED_RESOURCE_CLAIM", "IMPLICIT_EXTENDED_PREFIX"]

#: Annotation of the claim kube-scheduler makes for a pod's DRA-backed extended resources
#: (``resource/v1`` ``ExtendedResourceClaimAnnotation``).
EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
#: Prefix of the extended resource name every DeviceClass backs implicitly (``resource/v1``
#: ``ResourceDeviceClassPrefix``): ``deviceclass.resource.kubernetes.io/<class>``.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
#: ``allocationMode`` values (``ExactCount`` is the API default).
EXACT_COUNT = "ExactCount"
ALL = "All"


@dataclass(frozen=True)
class Device:
    """One published device. ``node``: the node of a node-local slice ('' otherwise);
    ``node_terms``: the ORed terms of a ``nodeSelector`` slice (``()`` when none); ``all_nodes``:
    every node may use it. ``unmodelled``: features of the device the planner does not account."""

    driver: str
    pool: str
    name: str
    view: DeviceView
    node: str = ""
    node_terms: tuple[NodeSelectorTerm, ...] = ()
    all_nodes: bool = False
    unmodelled: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        """``(driver, pool, device)``: how an allocation result names it."""
        return (self.driver, self.pool, self.name)


@dataclass(frozen=True)
class DeviceClassInfo:
    """A DeviceClass: its CEL selectors and, with KEP-5004, the extended resource it backs ('' none)."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str = ""


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim: ``count`` devices (``mode`` ``ExactCount``) or all matching ones
    (``All``, count 0) of ``device_class`` that pass every selector."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1


@dataclass(frozen=True)
class ClaimSpec:
    """What a claim (or a template's claim) asks for; ``unmodelled`` as in the module doc."""

    requests: tuple[DeviceRequest, ...] = ()
    unmodelled: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceClaimInfo:
    """A ResourceClaim. ``allocated``: ``(driver, pool, device)`` of each allocation result
    (``()`` while unallocated); ``allocation_terms``: the allocation's node selector terms;
    ``reserved_for``: uids of the pods in ``status.reservedFor``."""

    namespace: str
    name: str
    spec: ClaimSpec
    allocated: tuple[tuple[str, str, str], ...] = ()
    allocation_terms: tuple[NodeSelectorTerm, ...] = ()
    reserved_for: tuple[str, ...] = ()
    deleting: bool = False
    #: The claim kube-scheduler made for a pod's extended-resource requests backed by a DeviceClass
    #: (KEP-5004; annotation :data:`EXTENDED_RESOURCE_CLAIM` ``"true"``).
    extended: bool = False


def _quantity(v: Any, path: str) -> Quantity:
    try:
        return Quantity.parse(v)
    except (ValueError, TypeError, ArithmeticError) as e:
        raise InvalidObject(f"{path}: invalid quantity {v!r}") from e


def _qualified(name: str, driver: str) -> tuple[str, str]:
    """``domain/name`` -> (domain, name); a bare name is in the driver's domain."""
    domain, sep, rest = name.partition("/")
    return (domain, rest) if sep else (driver, name)


def _attribute(v: Any, path: str) -> Any:
    a = mapping(v, path)
    kinds = [k for k in ("int", "bool", "string", "version") if a.get(k) is not None]
    if len(kinds) != 1:
        raise InvalidObject(f"{path}: exactly one of int, bool, string, version must be set")
    k = kinds[0]
    if k == "int":
        return integer(a["int"], f"{path}.int", 0)
    if k == "bool":
        return boolean(a["bool"], f"{path}.bool")
    if k == "string":
        return text(a["string"], f"{path}.string")
    try:
        return Semver(text(a["version"], f"{path}.version"))
    except ValueError as e:
        raise InvalidObject(f"{path}.version: {e}") from e


def slice_devices(obj: Mapping[str, Any]) -> tuple[Device, ...]:
    """A v1 ResourceSlice (API JSON) -> its devices; raises InvalidObject naming the field."""
    _, spec, _ = sections(obj, "resourceslice")
    driver = text(spec.get("driver"), "spec.driver")
    if not driver:
        raise InvalidObject("spec.driver: required")
    pool = text(mapping(spec.get("pool"), "spec.pool").get("name"), "spec.pool.name")
    node = text(spec.get("nodeName"), "spec.nodeName")
    terms: tuple[NodeSelectorTerm, ...] = ()
    if spec.get("nodeSelector") is not None:
        terms = node_selector_terms(mapping(spec["nodeSelector"], "spec.nodeSelector").get("nodeSelectorTerms"),
                                     "spec.nodeSelector.nodeSelectorTerms") or (NodeSelectorTerm(),)
    all_nodes = boolean(spec.get("allNodes"), "spec.allNodes")
    per_device = boolean(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
    out = []
    for dp, d in mappings(spec.get("devices"), "spec.devices"):
        name = text(d.get("name"), f"{dp}.name")
        attributes: dict[str, dict[str, Any]] = {}
        for k, v in mapping(d.get("attributes"), f"{dp}.attributes").items():
            domain, n = _qualified(k, driver)
            attributes.setdefault(domain, {})[n] = _attribute(v, f"{dp}.attributes[{k}]")
        capacity: dict[str, dict[str, Quantity]] = {}
        for k, v in mapping(d.get("capacity"), f"{dp}.capacity").items():
            domain, n = _qualified(k, driver)
            cp = f"{dp}.capacity[{k}]"
            capacity.setdefault(domain, {})[n] = _quantity(mapping(v, cp).get("value"), f"{cp}.value")
        multiple = boolean(d.get("allowMultipleAllocations"), f"{dp}.allowMultipleAllocations")
        unmodelled = [what for key, what in (
            ("consumesCounters", "partitionable device (consumesCounters)"),
            ("taints", "device taints"),
            ("bindingConditions", "binding conditions"),
        ) if d.get(key)]
        if multiple:
            unmodelled.append("consumable capacity (allowMultipleAllocations)")
        if per_device:
            unmodelled.append("per-device node selection")
        view = DeviceView(driver, attributes, capacity, multiple)
        out.append(Device(driver, pool, name, view, node=node, node_terms=terms, all_nodes=all_nodes,
                          unmodelled=tuple(unmodelled)))
    return tuple(out)


@dataclass(frozen=True)
class SliceInfo:
    """One ResourceSlice as its pool is judged (:mod:`cogate.controller.devices.pools`): ``name``,
    ``driver``, ``pool`` (``spec.pool.name``), ``generation`` (``spec.pool.generation``: a driver
    that republishes a pool raises it), ``slice_count`` (``spec.pool.resourceSliceCount``: how
    many slices the pool has in that generation) and its ``devices`` (:func:`slice_devices`)."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...] = ()


def slice_info(obj: Mapping[str, Any]) -> SliceInfo:
    """A v1 ResourceSlice (API JSON) -> :class:`SliceInfo` (the informer's record); raises
    InvalidObject naming the field (``spec.pool.resourceSliceCount`` must be at least 1, as the
    API validates it)."""
    devices = slice_devices(obj)
    meta, spec, _ = sections(obj, "resourceslice")
    pool = mapping(spec.get("pool"), "spec.pool")
    return SliceInfo(
        name=text(meta.get("name"), "metadata.name"),
        driver=text(spec.get("driver"), "spec.driver"),
        pool=text(pool.get("name"), "spec.pool.name"),
        generation=integer(pool.get("generation"), "spec.pool.generation", 0, minimum=0),
        slice_count=integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1, minimum=1),
        devices=devices,
    )


def device_class_info(obj: Mapping[str, Any]) -> DeviceClassInfo:
    """A v1 DeviceClass (API JSON) -> :class:`DeviceClassInfo`; raises InvalidObject naming the field."""
    meta, spec, _ = sections(obj, "deviceclass")
    return DeviceClassInfo(
        name=text(meta.get("name"), "metadata.name"),
        selectors=_selectors(spec.get("selectors"), "spec.selectors"),
        extended_resource_name=text(spec.get("extendedResourceName"), "spec.extendedResourceName"),
    )


def _selectors(v: Any, path: str) -> tuple[str, ...]:
    out = []
    for sp, s in mappings(v, path):
        cel = mapping(s.get("cel"), f"{sp}.cel")
        out.append(text(cel.get("expression"), f"{sp}.cel.expression"))
    return tuple(out)


def _claim_spec(spec: Mapping[str, Any], path: str) -> ClaimSpec:
    devices = mapping(spec.get("devices"), f"{path}.devices")
    requests = []
    unmodelled: list[str] = []
    for rp, r in mappings(devices.get("requests"), f"{path}.devices.requests"):
        name = text(r.get("name"), f"{rp}.name")
        if r.get("firstAvailable"):
            unmodelled.append(f"request {name}: prioritized alternatives (firstAvailable)")
            continue
        ex = mapping(r.get("exactly"), f"{rp}.exactly")
        ep = f"{rp}.exactly"
        mode = text(ex.get("allocationMode"), f"{ep}.allocationMode", EXACT_COUNT)
        if mode not in (EXACT_COUNT, ALL):
            raise InvalidObject(f"{ep}.allocationMode: {mode!r} is neither ExactCount nor All")
        count = integer(ex.get("count"), f"{ep}.count", 1) if mode == EXACT_COUNT else 0
        if mode == EXACT_COUNT and count < 1:
            raise InvalidObject(f"{ep}.count: must be at least 1, got {count}")
        if boolean(ex.get("adminAccess"), f"{ep}.adminAccess"):
            unmodelled.append(f"request {name}: admin access")
        if ex.get("capacity"):
            unmodelled.append(f"request {name}: consumable capacity")
        if ex.get("tolerations"):
            unmodelled.append(f"request {name}: device taint tolerations")
        requests.append(DeviceRequest(name, text(ex.get("deviceClassName"), f"{ep}.deviceClassName"),
                                      _selectors(ex.get("selectors"), f"{ep}.selectors"), mode, count))
    if devices.get("constraints"):
        unmodelled.append("constraints (matchAttribute)")
    return ClaimSpec(tuple(requests), tuple(unmodelled))


def device_claim_info(obj: Mapping[str, Any]) -> DeviceClaimInfo:
    """A v1 ResourceClaim (API JSON) -> :class:`DeviceClaimInfo`; raises InvalidObject naming the field."""
    meta, spec, status = sections(obj, "resourceclaim")
    allocation = mapping(status.get("allocation"), "status.allocation")
    results = []
    rp0 = "status.allocation.devices.results"
    for rp, r in mappings(mapping(allocation.get("devices"), "status.allocation.devices").get("results"), rp0):
        results.append((text(r.get("driver"), f"{rp}.driver"), text(r.get("pool"), f"{rp}.pool"),
                        text(r.get("device"), f"{rp}.device")))
    terms: tuple[NodeSelectorTerm, ...] = ()
    if allocation.get("nodeSelector") is not None:
        terms = node_selector_terms(
            mapping(allocation["nodeSelector"], "status.allocation.nodeSelector").get("nodeSelectorTerms"),
            "status.allocation.nodeSelector.nodeSelectorTerms")
    reserved = tuple(text(r.get("uid"), f"{p}.uid") for p, r in mappings(status.get("reservedFor"), "status.reservedFor"))
    return DeviceClaimInfo(
        namespace=text(meta.get("namespace"), "metadata.namespace"),
        name=text(meta.get("name"), "metadata.name"),
        spec=_claim_spec(spec, "spec"),
        allocated=tuple(results),
        allocation_terms=terms,
        reserved_for=reserved,
        deleting=meta.get("deletionTimestamp") is not None,
        extended=(mapping(meta.get("annotations"), "metadata.annotations").get(EXTENDED_RESOURCE_CLAIM) == "true"),
    )


def claim_template_info(obj: Mapping[str, Any]) -> tuple[str, str, ClaimSpec]:
    """A v1 ResourceClaimTemplate (API JSON) -> ``(namespace, name, spec of the claims made from it)``;
    raises InvalidObject naming the field."""
    meta, spec, _ = sections(obj, "resourceclaimtemplate")
    inner = mapping(spec.get("spec"), "spec.spec")
    return (text(meta.get("namespace"), "metadata.namespace"), text(meta.get("name"), "metadata.name"),
            _claim_spec(inner, "spec.spec"))



@dataclass(frozen=True)
class Signature:
    """What one device request asks of a device, whatever claim or member it comes from: the class
    and the request's own selectors (kube-scheduler applies the class's selectors, then the request's:
    ``structured`` allocator, ``isSelectable``). Members whose requests share a signature compete for
    the same devices."""

    device_class: str
    selectors: tuple[str, ...] = ()

    @staticmethod
    def of(request: DeviceRequest) -> Signature:
        return Signature(request.device_class, request.selectors)


class Matcher:
    """Which devices a :class:`Signature` selects, cached per (expression, device) so that a device
    or a selector is evaluated once, however many passes and members ask (cel-python costs about
    0.2-0.4 ms per evaluation). ``classes``: DeviceClassInfo by name."""

    def __init__(self) -> None:
        #: device key -> (the view its results were computed on, expression -> result)
        self._results: dict[tuple[str, str, str], tuple[DeviceView, dict[str, bool]]] = {}

    def unchecked(self, sig: Signature, classes: Mapping[str, DeviceClassInfo]) -> str:
        """Why ``sig`` cannot be evaluated ('' when it can): its class does not exist, or one of its
        selectors or its class's is unchecked (:func:`~cogate.controller.devices.cel.compile_selector`)."""
        cls = classes.get(sig.device_class)
        if cls is None:
            return f"device class {sig.device_class!r} not found"
        for expr in cls.selectors + sig.selectors:
            why = compile_selector(expr).unchecked
            if why:
                return why
        return ""

    def matches(self, sig: Signature, classes: Mapping[str, DeviceClassInfo], device: Device) -> bool:
        """``device`` passes every selector of ``sig``'s class and of ``sig`` (call :meth:`unchecked`
        first: an unchecked signature raises ValueError). A device whose view changed is evaluated
        again (the cache is keyed by the device and checks its view)."""
        cls = classes[sig.device_class]
        cached = self._results.get(device.key)
        if cached is None or (cached[0] is not device.view and cached[0] != device.view):
            cached = self._results[device.key] = (device.view, {})
        results = cached[1]
        for expr in cls.selectors + sig.selectors:
            r = results.get(expr)
            if r is None:
                r = results[expr] = compile_selector(expr).matches(device.view)
            if not r:
                return False
        return True

    def keys(self) -> list[tuple[str, str, str]]:
        """The devices whose results are cached."""
        return list(self._results)

    def forget(self, keys: Collection[tuple[str, str, str]]) -> None:
        """Drop the cached results of devices that are gone."""
        for k in keys:
            self._results.pop(k, None)


def assign(selected: Mapping[Signature, Collection[tuple[str, str, str]]]) -> dict[tuple[str, str, str], Signature]:
    """Each device -> the one signature it counts toward, given the devices each signature selects.

    A device several signatures select counts toward the most specific of them (the one selecting
    the fewest devices; ties by class, then selectors), never toward two: counts per signature then
    never promise one device twice, so any placement within them can be given every device it
    counted (the planner's capacity rule for devices). Devices no signature selects are left out."""
    order = sorted(selected, key=lambda s: (len(selected[s]), s.device_class, s.selectors))
    out: dict[tuple[str, str, str], Signature] = {}
    for sig in order:
        for key in selected[sig]:
            out.setdefault(key, sig)
    return out
