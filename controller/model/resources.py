"""Resource quantities and a pod's effective request (pure).

Units (docs/internals.md): a ResourceList is ``dict[str, int]`` with ``cpu`` in
millicores and every other resource (memory, ephemeral-storage, hugepages-*,
pods, extended resources such as ``nvidia.com/gpu``) in base units, rounded up
to an integer the way ``resource.Quantity.Value()`` / ``MilliValue()`` do.

Sources of the rules:

* Quantity grammar: ``k8s.io/apimachinery/pkg/api/resource`` (``ParseQuantity``):
  ``<sign><digits>[.<digits>]<suffix>`` with suffix one of the decimal SI
  suffixes ``n u m "" k M G T P E``, the binary suffixes ``Ki Mi Gi Ti Pi Ei`` or a
  decimal exponent ``e<int>`` / ``E<int>``.
* Effective request: ``k8s.io/component-helpers/resource.PodRequests`` as used by
  kube-scheduler's NodeResourcesFit plugin: containers and restartable
  ("sidecar", ``restartPolicy: Always``) init containers are summed; each plain
  init container needs its own request plus the sidecars started before it; the
  pod needs the maximum of the two, plus ``spec.overhead``. Pod-level resources
  (``spec.resources``, PodLevelResources) replace the container aggregate for
  cpu and memory when set.
* Requests default from limits (API defaulting of ``resources.requests``).
* In-place resize (InPlacePodVerticalScaling, GA and locked on in Kubernetes 1.35+):
  kube-scheduler calls ``PodRequests`` with ``UseStatusResources`` (pkg/scheduler/framework
  ``PodInfo.CalculateResource``), so a container (or sidecar) whose status reports
  ``resources`` counts ``max(spec, status.resources.requests, allocatedResources)``, and only
  ``max(actual, allocated)`` while the resize is Infeasible (the ``PodResizePending`` condition
  with reason ``Infeasible``; component-helpers ``determineEffectiveRequests``,
  ``IsPodResizeInfeasible``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

__all__ = [
    "QuantityError",
    "parse_quantity",
    "to_units",
    "effective_request",
    "format_quantity",
    "format_resources",
    "ResourceList",
]

ResourceList = dict[str, int]


class QuantityError(ValueError):
    """A resource quantity that does not follow the Kubernetes grammar."""


_BINARY = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]?|[eE][+-]?[0-9]+)"
)
#: Exponent limit: keeps a hostile "1e999999999" from building a giant integer.
_MAX_EXPONENT = 100


def parse_quantity(s: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity exactly.

    Accepts API strings such as ``"100m"``, ``"1.5Gi"``, ``"2"``, ``"1e3"``,
    ``"+4k"``, ``"-1"``, ``".5"`` and JSON numbers (``int``/``float``; a float is
    read through its shortest decimal repr, so ``0.1`` is exactly 1/10).

    Returns the value as a :class:`fractions.Fraction` in base units (cores for
    cpu, bytes for memory).

    Raises :class:`QuantityError` naming the text on anything else (empty
    string, whitespace, unknown suffix such as ``"1K"`` or ``"1 Gi"``, ``"1e"``,
    booleans, NaN/inf, other types).
    """
    if isinstance(s, bool):
        raise QuantityError(f"invalid quantity {s!r}: a boolean is not a quantity")
    if isinstance(s, int):
        return Fraction(s)
    if isinstance(s, float):
        if not math.isfinite(s):
            raise QuantityError(f"invalid quantity {s!r}: not a finite number")
        return Fraction(repr(s))
    if not isinstance(s, str):
        raise QuantityError(f"invalid quantity {s!r}: expected a string or number, got {type(s).__name__}")
    m = _QUANTITY_RE.fullmatch(s)
    if m is None:
        raise QuantityError(
            f"invalid quantity {s!r}: expected <number><suffix> with suffix one of "
            "n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>"
        )
    num = m.group("num")
    if num.endswith("."):
        num = num[:-1]
    value = Fraction(num)
    suffix = m.group("suffix")
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= _DECIMAL[suffix]
    else:  # decimal exponent
        exp = int(suffix[1:])
        if abs(exp) > _MAX_EXPONENT:
            raise QuantityError(f"invalid quantity {s!r}: exponent {exp} out of range")
        value *= Fraction(10) ** exp
    return -value if m.group("sign") == "-" else value


def _ceil_away(q: Fraction) -> int:
    """Round away from zero, as inf.Dec's RoundUp in Quantity.Value()."""
    return math.ceil(q) if q >= 0 else -math.ceil(-q)


def to_units(resource: str, q: Fraction) -> int:
    """Convert a quantity to the ResourceList unit of ``resource``.

    ``cpu`` -> millicores (``Quantity.MilliValue()``), anything else -> base
    units (``Quantity.Value()``); both round up (away from zero).
    """
    if resource == "cpu":
        return _ceil_away(q * 1000)
    return _ceil_away(q)


# -- effective request -------------------------------------------------------

#: Resources a pod-level ``spec.resources`` stanza may set (PodLevelResources).
_POD_LEVEL = ("cpu", "memory")


def _container_requests(c: Any, path: str) -> dict[str, Fraction]:
    """Requests of one container, defaulting each missing request from its limit."""
    if c is None:
        return {}
    if not isinstance(c, Mapping):
        raise QuantityError(f"{path}: expected an object, got {type(c).__name__}")
    res = c.get("resources")
    if res is None:
        res = {}
    if not isinstance(res, Mapping):
        raise QuantityError(f"{path}.resources: expected an object")
    return _requests_with_limits(res, f"{path}.resources")


def _requests_with_limits(res: Mapping[str, Any], path: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for kind in ("limits", "requests"):  # requests override limits
        lst = res.get(kind)
        if lst is None:
            lst = {}
        if not isinstance(lst, Mapping):
            raise QuantityError(f"{path}.{kind}: expected an object")
        for name, raw in lst.items():
            try:
                out[str(name)] = parse_quantity(raw)
            except QuantityError as e:
                raise QuantityError(f"{path}.{kind}.{name}: {e}") from None
    return out


def _add(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, Fraction(0)) + v


def _max_into(into: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _list(spec: Mapping[str, Any], key: str) -> list[Any]:
    v = spec.get(key)
    if v is None:
        v = []
    if not isinstance(v, list):
        raise QuantityError(f"spec.{key}: expected a list, got {type(v).__name__}")
    return v


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """component-helpers ``IsPodResizeInfeasible``: the first ``PodResizePending`` condition has
    reason ``Infeasible`` (the deprecated ``status.resize`` field is no longer written in 1.36)."""
    conds = status.get("conditions")
    for c in conds if isinstance(conds, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "PodResizePending":
            return c.get("reason") == "Infeasible"
    return False


def _status_requests(status: Mapping[str, Any] | None) -> tuple[dict[str, Mapping[str, Any]], bool]:
    """Container statuses by name (containers and init containers) and whether the resize is Infeasible."""
    if not isinstance(status, Mapping):
        return {}, False
    out: dict[str, Mapping[str, Any]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        lst = status.get(key)
        for cs in lst if isinstance(lst, list) else ():
            if isinstance(cs, Mapping) and isinstance(cs.get("name"), str):
                out[cs["name"]] = cs
    return out, _resize_infeasible(status)


def _resized(spec_req: dict[str, Fraction], cs: Mapping[str, Any] | None, infeasible: bool,
             path: str) -> dict[str, Fraction]:
    """``determineEffectiveRequests``: when the container status reports ``resources``, the larger
    of spec, actual (``resources.requests``) and allocated (``allocatedResources``) per resource;
    an Infeasible resize drops the spec (the desired size the node cannot give)."""
    if cs is None or not isinstance(cs.get("resources"), Mapping):
        return spec_req
    actual = cs["resources"].get("requests") or {}
    allocated = cs.get("allocatedResources") or {}
    out: dict[str, Fraction] = {} if infeasible else dict(spec_req)
    for kind, lst in (("resources.requests", actual), ("allocatedResources", allocated)):
        if not isinstance(lst, Mapping):
            raise QuantityError(f"{path}.{kind}: expected an object")
        for name, raw in lst.items():
            try:
                q = parse_quantity(raw)
            except QuantityError as e:
                raise QuantityError(f"{path}.{kind}.{name}: {e}") from None
            if str(name) not in out or q > out[str(name)]:
                out[str(name)] = q
    return out


def effective_request(spec: Mapping[str, Any], status: Mapping[str, Any] | None = None) -> ResourceList:
    """The pod's effective request per resource, as kube-scheduler computes it.

    ``spec`` is a pod spec in API JSON (camelCase). Rule
    (component-helpers ``resource.PodRequests``, KEP-753 for sidecars)::

        reqs        = sum(containers) + sum(restartable init containers)
        init_use(i) = init[i] + sum(restartable init containers before i)
        pod         = max(reqs, max_i init_use(i)) + overhead

    (for a restartable init container, ``init_use`` is the running sum of
    sidecars including itself). Every resource name counts (cpu, memory,
    ephemeral-storage, hugepages-*, extended). Missing requests default from
    limits. Pod-level ``spec.resources`` requests (or limits) replace the
    aggregate for cpu and memory. Resources whose request is zero are omitted.

    ``status`` (the pod's API ``status``, optional): a container or sidecar being resized in
    place counts as in :func:`_resized` (module docstring: In-place resize); plain init
    containers always count their spec.

    Returns ``{resource: units}`` (cpu millicores, others base units, rounded up).
    Raises :class:`QuantityError` naming the field path on a bad quantity.
    """
    if not isinstance(spec, Mapping):
        raise QuantityError(f"spec: expected an object, got {type(spec).__name__}")
    statuses, infeasible = _status_requests(status)

    def resized(c: Any, creq: dict[str, Fraction], path: str) -> dict[str, Fraction]:
        name = c.get("name") if isinstance(c, Mapping) else None
        if not statuses or not isinstance(name, str):
            return creq
        return _resized(creq, statuses.get(name), infeasible, f"status (container {name})")

    reqs: dict[str, Fraction] = {}
    for i, c in enumerate(_list(spec, "containers")):
        _add(reqs, resized(c, _container_requests(c, f"spec.containers[{i}]"), f"spec.containers[{i}]"))
    sidecars: dict[str, Fraction] = {}
    init_use: dict[str, Fraction] = {}
    for i, c in enumerate(_list(spec, "initContainers")):
        creq = _container_requests(c, f"spec.initContainers[{i}]")
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            creq = resized(c, creq, f"spec.initContainers[{i}]")
            _add(reqs, creq)
            _add(sidecars, creq)
            use = dict(sidecars)
        else:
            use = dict(creq)
            _add(use, sidecars)
        _max_into(init_use, use)
    _max_into(reqs, init_use)

    pod_res = spec.get("resources")
    if pod_res is not None:
        if not isinstance(pod_res, Mapping):
            raise QuantityError("spec.resources: expected an object")
        pod_level = _requests_with_limits(pod_res, "spec.resources")
        for name in _POD_LEVEL:
            if name in pod_level:
                reqs[name] = pod_level[name]

    overhead = spec.get("overhead")
    if overhead is None:
        overhead = {}
    if not isinstance(overhead, Mapping):
        raise QuantityError("spec.overhead: expected an object")
    for name, raw in overhead.items():
        try:
            q = parse_quantity(raw)
        except QuantityError as e:
            raise QuantityError(f"spec.overhead.{name}: {e}") from None
        reqs[str(name)] = reqs.get(str(name), Fraction(0)) + q

    out: ResourceList = {}
    for name, q in reqs.items():
        units = to_units(name, q)
        if units:
            out[name] = units
    return out


# -- human formatting ---------------------------------------------------------

_BYTE_RESOURCES_PREFIX = ("memory", "ephemeral-storage", "hugepages-")


def _is_bytes(resource: str) -> bool:
    return resource.startswith(_BYTE_RESOURCES_PREFIX)


def format_quantity(resource: str, units: int) -> str:
    """Human text for ``units`` of ``resource`` (for messages, not for the API).

    cpu: whole cores as ``"2"``, otherwise millicores ``"1500m"``; byte
    resources (memory, ephemeral-storage, hugepages-*): ``Gi``/``Mi``/``Ki``
    with at most one decimal (``"1.5Gi"``, ``"512Mi"``); others: the integer.
    """
    if resource == "cpu":
        if units % 1000 == 0:
            return str(units // 1000)
        return f"{units}m"
    if _is_bytes(resource):
        sign = "-" if units < 0 else ""
        a = abs(units)
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if a >= size:
                if a % size == 0:
                    return f"{sign}{a // size}{suffix}"
                return f"{sign}{math.ceil(a * 10 / size) / 10:g}{suffix}"
        return f"{sign}{a}"
    return str(units)


def format_resources(rl: Mapping[str, int], names: Iterable[str] | None = None) -> str:
    """``"cpu 2, memory 4Gi"`` for the given (or all non-zero) resources, sorted."""
    keys = sorted(names if names is not None else (k for k, v in rl.items() if v))
    return ", ".join(f"{k} {format_quantity(k, rl.get(k, 0))}" for k in keys)
