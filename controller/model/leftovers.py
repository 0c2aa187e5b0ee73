"""Leftovers of a migration from scheduler-plugins (pure): a CRD that prunes cogate's status, and a
second writer of PodGroup status (issue 21 item 8; docs/semantics.md, "Migrating from scheduler-plugins").

cogate serves the same ``scheduling.x-k8s.io/v1alpha1`` PodGroup as scheduler-plugins, so two things
can be left behind by a migration, and neither fails loudly by itself:

- **scheduler-plugins' own CRD** (its schema has no ``status.conditions``; the API server prunes
  unknown fields of a structural schema without an error). :func:`dropped_status_fields` compares
  what a status write sent with what the API server stored (the response of the same request: no
  read of the CRD, so no RBAC on CustomResourceDefinitions, and any cause of a drop is caught). The shell (:class:`cogate.controller.kube.writer.Writer`)
  then no longer sends what is dropped (:func:`without`), so a dropped field never makes a write loop,
  and sends it again every :data:`RECHECK_SECONDS` to see whether the CRD was replaced.
- **scheduler-plugins' PodGroup controller** still running: it writes ``status.phase`` and the
  counts of the same objects (phase ``Pending`` at once, ``Scheduling`` once minMember pods
  *exist*, gated or not: ``pkg/controllers/podgroup_controller.go`` ``Reconcile``).
  :func:`foreign_status_writers` reads the object's ``metadata.managedFields`` (entries of the
  ``status`` subresource whose manager is not cogate's, :data:`FIELD_MANAGER`:
  :func:`cogate.controller.model.managedfields.status_writers`), and
  :func:`phase_for_release` replaces a phase another manager wrote by cogate's own record of its
  release (its ``Released`` condition, which scheduler-plugins never writes), so another writer's
  phase is never taken for a release.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cogate.controller.model.managedfields import status_writers

__all__ = [
    "FIELD_MANAGER",
    "FOREIGN_WRITE_SECONDS",
    "to_write_now",
    "OWN_FIELD_MANAGERS",
    "RECHECK_SECONDS",
    "STATUS_FIELDS",
    "dropped_message",
    "dropped_status_fields",
    "foreign_message",
    "foreign_status_writers",
    "phase_for_release",
    "phase_writer",
    "without",
]

#: The field manager of cogate's status writes (``fieldManager`` of the PATCH).
FIELD_MANAGER = "cogate-controller"
#: Managers counted as cogate: its own, and the Python client's default (the ``User-Agent`` prefix),
#: which cogate's status writes carried before they named a field manager.
OWN_FIELD_MANAGERS = frozenset({FIELD_MANAGER, "OpenAPI-Generator"})
#: Status fields cogate writes (``controller/status/writes.py`` ``STATUS_FIELDS``, without ``occupiedBy``,
#: which cogate keeps as it is).
STATUS_FIELDS = ("phase", "scheduled", "running", "succeeded", "failed", "scheduleStartTime", "conditions")
#: Seconds after which a field the API server dropped is sent again (the CRD may have been replaced).
RECHECK_SECONDS = 300.0
#: Seconds between two writes of status fields another manager also writes (unless the write records a
#: release): two controllers correcting each other never make a hot loop.
FOREIGN_WRITE_SECONDS = 10.0
#: The CRD cogate ships (the fix for a pruning one).
_CRD_FIX = ("install cogate's CRD: kubectl apply --server-side --force-conflicts -f "
            "charts/cogate/crds/scheduling.x-k8s.io_podgroups.yaml (Helm never upgrades a CRD it did not create)")


def dropped_status_fields(sent: Mapping[str, Any] | None, stored: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Fields of the status merge patch ``sent`` (the ``status`` object: field -> value, ``None`` to
    delete) that the API server did not store: set (not ``None``, not an empty list) in ``sent`` and
    absent or ``None`` in ``stored`` (the ``status`` of the object the same PATCH returned). Such a
    field was pruned by the CRD's schema (a field another writer changed in between is still
    present). In :data:`STATUS_FIELDS` order, then any other field by name."""
    stored = stored if isinstance(stored, Mapping) else {}
    out = []
    for key, value in (sent or {}).items():
        if value is None or value == [] or value == {}:
            continue
        if stored.get(key) is None:
            out.append(key)
    order = {k: i for i, k in enumerate(STATUS_FIELDS)}
    return tuple(sorted(out, key=lambda k: (order.get(k, len(order)), k)))


def without(body: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any] | None:
    """The status merge patch ``body`` (``{"status": {...}}``) without ``fields``; ``None`` when nothing
    is left to write."""
    status = {k: v for k, v in (body.get("status") or {}).items() if k not in fields}
    return {**body, "status": status} if status else None


def to_write_now(body: Mapping[str, Any], contested: Sequence[str], last_write: float | None, now: float
                 ) -> dict[str, Any] | None:
    """The part of status write ``body`` to send now beside another writer: ``contested`` are the
    status fields other managers own (:func:`foreign_status_writers`), ``last_write`` when cogate
    last wrote one of them (``now``: monotonic seconds). A write that records a release (it sets
    ``scheduleStartTime``) goes whole at once: the decision is written before any gate goes. So does
    any write :data:`FOREIGN_WRITE_SECONDS` after the last contested one. Otherwise the contested
    fields wait (taking them back at once would make the other controller write them again, and so
    on): the rest (conditions, fields only cogate writes) is sent now; ``None`` when nothing is left."""
    status = body.get("status") or {}
    if not contested or "scheduleStartTime" in status or last_write is None or now - last_write >= FOREIGN_WRITE_SECONDS:
        return dict(body)
    return without(body, contested)


def _writers(raw: Mapping[str, Any]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """:func:`~cogate.controller.model.managedfields.status_writers` of object ``raw`` (API JSON)."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    return status_writers(meta) if isinstance(meta, Mapping) else iter(())


def foreign_status_writers(raw: Mapping[str, Any], own: frozenset[str] = OWN_FIELD_MANAGERS
                           ) -> dict[str, tuple[str, ...]]:
    """Managers other than cogate's (``own``) that own status fields cogate writes on PodGroup
    ``raw`` (API JSON with ``metadata.managedFields``): manager -> those fields, sorted. A manager
    owns a field when its last write of the ``status`` subresource changed it (server-side field
    management), so a manager that owns none of them any more is not listed."""
    out: dict[str, set[str]] = {}
    for manager, owned in _writers(raw):
        fields = [f for f in owned if f in STATUS_FIELDS]
        if fields and manager not in own:
            out.setdefault(manager, set()).update(fields)
    return {m: tuple(sorted(f)) for m, f in sorted(out.items())}


def phase_writer(raw: Mapping[str, Any]) -> str | None:
    """The manager that owns ``status.phase`` of ``raw`` (its last writer), ``None`` when unknown."""
    return next((manager for manager, fields in _writers(raw) if "phase" in fields), None)


def phase_for_release(raw: Mapping[str, Any], own: frozenset[str] = OWN_FIELD_MANAGERS) -> str | None:
    """The phase cogate reads instead of ``status.phase`` when another manager wrote it; ``None``
    when the phase is cogate's own (or its writer is unknown): read it as it is.

    Another writer's phase says nothing about cogate's release (scheduler-plugins' controller
    writes ``Scheduling`` as soon as minMember pods exist, gated or not). cogate's own record is
    its ``Released`` condition: ``True`` reads as ``Scheduling`` (released; the counts then decide
    the phase cogate writes), anything else as ``Pending`` (not released: the group is decided as a
    whole, as on its first release). ``Finished`` and ``Failed`` are kept (scheduler-plugins never
    changes a group in those phases, and they end a release in both readings)."""
    writer = phase_writer(raw)
    if writer is None or writer in own:
        return None
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    if status.get("phase") in ("Finished", "Failed"):
        return None
    conds = status.get("conditions") if isinstance(status.get("conditions"), list) else []
    released = any(isinstance(c, Mapping) and c.get("type") == "Released" and c.get("status") == "True"
                   for c in conds)
    return "Scheduling" if released else "Pending"


def dropped_message(fields: Sequence[str]) -> str:
    """The Warning ``StatusFieldsDropped`` text (and log line) for status ``fields`` the API server pruned."""
    names = ", ".join(f"status.{f}" for f in fields)
    return (f"the API server dropped {names} from cogate's status write: the installed PodGroup CRD's schema "
            "does not have them (scheduler-plugins' CRD left installed?), so this PodGroup's conditions (why it "
            f"waits, what was released) are lost; {_CRD_FIX}")


def foreign_message(writers: Mapping[str, Sequence[str]]) -> str:
    """The Warning ``ForeignStatusWriter`` text naming each other writer and the fields it owns."""
    who = "; ".join(f"{m} ({', '.join('status.' + f for f in fs)})" for m, fs in writers.items())
    return (f"another controller also writes this PodGroup's status: {who}. scheduler-plugins' PodGroup "
            "controller still running beside cogate? cogate never takes another writer's phase for a release "
            "(it reads its own Released condition) and takes back the fields the other writer changed at most "
            "every 10 s; stop the other controller (e.g. scale its Deployment to 0)")
