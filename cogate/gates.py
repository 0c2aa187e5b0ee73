"""Scheduling gates of a pod (API JSON): read, find, add, remove. Pure; the one walker of
``spec.schedulingGates``, used by the webhook (add) and the controller (read, remove).

As Kueue's ``pkg/util/pod`` (``Gate``, ``Ungate``, ``gateIndex``) shares one set between its
webhook and its reconciler. Additions append (other gates keep their order and index);
removals are a ``test`` of the entry's name followed by a ``remove`` of its index, so a
patch built from a stale read fails (HTTP 422) instead of removing another gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A JSON Patch operation (RFC 6902).
PatchOp = dict[str, Any]


class GateShapeError(ValueError):
    """``spec`` or ``spec.schedulingGates`` of a pod has an unexpected shape.

    ``str(exc)`` is ``"<path>: <problem>"`` with the path from the pod's root, e.g.
    ``"spec.schedulingGates[1].name: must be a string, got int"``; callers prefix it
    (``request.object.`` in an AdmissionReview).
    """


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = pod.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise GateShapeError(f"spec: must be an object, got {type(spec).__name__}")
    return spec


def names(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The names in ``spec.schedulingGates``, in order (() when absent or null).

    Raises :class:`GateShapeError` naming the field when ``spec`` is not an object, the list
    is not a list, an entry is not an object or a name is not a string (a missing name reads
    as '').
    """
    spec = _spec(pod)
    gates = None if spec is None else spec.get("schedulingGates")
    if gates is None:
        return ()
    if not isinstance(gates, list):
        raise GateShapeError(f"spec.schedulingGates: must be an array, got {type(gates).__name__}")
    out = []
    for i, entry in enumerate(gates):
        if not isinstance(entry, Mapping):
            raise GateShapeError(f"spec.schedulingGates[{i}]: must be an object, got {type(entry).__name__}")
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise GateShapeError(f"spec.schedulingGates[{i}].name: must be a string, got {type(name).__name__}")
        out.append(name or "")
    return tuple(out)


def find(pod: Mapping[str, Any], gate: str) -> int | None:
    """Index of gate ``gate`` in ``spec.schedulingGates``, or None (also for an odd shape:
    a pod read back from the API server, where such a list cannot occur, is never refused)."""
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    if not isinstance(gates, list):
        return None
    for i, entry in enumerate(gates):
        if isinstance(entry, Mapping) and entry.get("name") == gate:
            return i
    return None


def add(pod: Mapping[str, Any], gate: str) -> list[PatchOp] | None:
    """JSON Patch adding gate ``gate``; None when the pod carries it already.

    Appends (``add`` at ``/spec/schedulingGates/-``) when the list exists; creates the list
    when absent or null, and ``spec`` itself only when the object has none. Raises
    :class:`GateShapeError` (see :func:`names`).
    """
    entry = {"name": gate}
    spec = _spec(pod)
    if spec is None:
        return [{"op": "add", "path": "/spec", "value": {"schedulingGates": [entry]}}]
    if spec.get("schedulingGates") is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [entry]}]
    if gate in names(pod):
        return None
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": entry}]


def remove(pod: Mapping[str, Any], gate: str) -> list[PatchOp] | None:
    """JSON Patch removing gate ``gate`` (``test`` its name, then ``remove`` its index);
    None when the pod does not carry it."""
    idx = find(pod, gate)
    if idx is None:
        return None
    return [{"op": "test", "path": f"/spec/schedulingGates/{idx}/name", "value": gate},
            {"op": "remove", "path": f"/spec/schedulingGates/{idx}"}]
