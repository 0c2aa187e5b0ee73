"""Who set a field of an object, from its ``metadata.managedFields`` (pure; server-side field
management, Kubernetes 1.22+).

The API server records, per field manager and per subresource, the fields each request set
(``fieldsV1``: ``{"f:spec": {"f:nodeName": {}}}``). Two facts cogate reads from it:

* :func:`status_field_manager`: the last writer of a status field (``status.nominatedNodeName``:
  whether cogate's preemption nominated a pod or kube-scheduler did); :func:`status_writers`, each
  writer of the ``status`` subresource with the top-level fields it owns (who else writes a
  PodGroup's status: :mod:`cogate.controller.model.leftovers`).
* :func:`spec_field_set`: whether a request on the object itself set a spec field. For
  ``spec.nodeName`` that tells a pod **created bound** (the creator's entry owns ``f:nodeName``)
  from one kube-scheduler bound: the binding subresource writes the pod in storage directly
  (k8s.io/kubernetes ``pkg/registry/core/pod/storage/storage.go`` ``setPodNodeAndMetadata``) and
  records no managed field, and ``spec.nodeName`` cannot be changed by an update once set.

Both never raise: managedFields are the API server's bookkeeping, not the object's meaning; a
missing or malformed list reads as "unknown" ('' or False).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["status_writers", "status_field_manager", "spec_field_set"]


def _entries(meta: Mapping[str, Any], subresource: str) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """``(entry, fieldsV1)`` of the well-formed managedFields entries of ``subresource`` ('' for
    the object itself)."""
    entries = meta.get("managedFields")
    if not isinstance(entries, list):
        return
    for e in entries:
        if isinstance(e, Mapping) and (e.get("subresource") or "") == subresource:
            fields = e.get("fieldsV1")
            if isinstance(fields, Mapping):
                yield e, fields


def status_writers(meta: Mapping[str, Any]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(manager, fields)`` for each well-formed ``status``-subresource entry of ``meta`` (an
    object's ``metadata``), in the list's order: the top-level status fields the manager owns
    (``f:status`` -> ``f:<name>``), sorted; a manager owns a field when its last write of the
    subresource changed it. Entries without a manager name or an ``f:status`` are left out."""
    for e, fields in _entries(meta, "status"):
        st = fields.get("f:status")
        manager = e.get("manager")
        if isinstance(st, Mapping) and isinstance(manager, str):
            yield sys.intern(manager), tuple(sorted(k[2:] for k in st if isinstance(k, str) and k.startswith("f:")))


def status_field_manager(meta: Mapping[str, Any], name: str) -> str:
    """The manager of the ``status``-subresource entry of ``meta`` (an object's ``metadata``)
    owning ``status.<name>`` (its last writer), '' when none or unreadable."""
    key = f"f:{name}"  # on every pod record's path: one lookup per entry, no list of its fields
    for e, fields in _entries(meta, "status"):
        st = fields.get("f:status")
        if isinstance(st, Mapping) and key in st and isinstance(e.get("manager"), str):
            return sys.intern(e["manager"])
    return ""


def spec_field_set(meta: Mapping[str, Any], name: str) -> bool:
    """Some request on the object itself (no subresource: create, update, patch, apply) set
    ``spec.<name>``, as ``meta``'s managedFields record it; False when none did or unreadable."""
    key = f"f:{name}"
    for _, fields in _entries(meta, ""):
        spec = fields.get("f:spec")
        if isinstance(spec, Mapping) and key in spec:
            return True
    return False
