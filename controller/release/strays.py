"""Objects outside any gang: orphans, pods without their PodGroup, invalid objects.

Verbs:

- :meth:`Strays.left` (members informer event) and :meth:`Strays.release` (before the next
  pass): a gated pod that left its group (label removed or emptied) would keep cogate's gate
  for ever, since no PodGroup names it any more; it is read back and, still without the
  label, ungated: it is scheduled as a plain pod (Normal ``LeftPodGroup`` on the pod);
- :meth:`Strays.native` (each pass) and :meth:`Strays.release`: a gated pod stored with
  ``spec.schedulingGroup`` or ``spec.workloadRef`` (the API server kept the field: GenericWorkload is
  on) is no member (:func:`cogate.controller.model.records.member_key`); it is read back and, still setting
  the field, only cogate's gate is removed (``test`` + ``remove``): Kubernetes' own gang scheduling
  places it (Normal ``NativeGangScheduling`` on the pod; issue 18);
- :meth:`Strays.missing`: each gated member whose PodGroup does not exist is told once
  (Normal ``PodGroupNotFound`` on the pod): it waits for it, and a typo in the label would
  otherwise go unnoticed;
- :meth:`Strays.invalid_member`, :meth:`Strays.invalid_podgroup` (informer callbacks): an
  object that fails conversion is reported as a Warning ``InvalidObject`` on its PodGroup;
- :meth:`Strays.leftovers` (each pass): what a migration from scheduler-plugins left behind
  (:mod:`cogate.controller.model.leftovers`): a PodGroup whose status writes lost fields (its CRD
  prunes them) gets a Warning ``StatusFieldsDropped``, one whose status another manager also
  writes a Warning ``ForeignStatusWriter`` naming it (each once per situation, refreshed as
  other events; logged once), and the gauge ``cogate_controller_foreign_status_writers``.

Handed the gate name, the PodGroups informer, the writer, the metrics, the event emitter,
the clock (epoch seconds) and whether this process leads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cogate import api
from cogate.controller.model import leftovers as leftovers_mod
from cogate.controller.status import notices
from cogate.controller.kube.events import Emitter
from cogate.controller.kube.informer import Informer
from cogate.controller.status.inputs import GroupObject, waiting_for_pod_group
from cogate.controller.kube.metrics import Metrics
from cogate.controller.status.notices import ObjectRef, log_extra
from cogate.controller.planning.patches import left_group, left_to_native
from cogate.controller.model.records import PodInfo
from cogate.controller.kube.writer import Writer, WriteResult

log = logging.getLogger(__name__)


def pod_ref(namespace: str, name: str, uid: str) -> ObjectRef:
    """The involved object of an Event on a pod."""
    return ObjectRef(namespace, name, uid, kind="Pod", api_version="v1")


class Strays:
    """See the module doc; ``leading()``: whether this process leads (only the leader ungates)."""

    def __init__(self, gate: str, podgroups: Informer, writer: Writer, metrics: Metrics, events: Emitter,
                 clock: Callable[[], float], leading: Callable[[], bool]) -> None:
        self.gate = gate
        self.podgroups = podgroups
        self.writer = writer
        self.metrics = metrics
        self.events = events
        self._clock = clock
        self._leading = leading
        #: (namespace, name, uid, group, native field) of gated pods to read back and ungate: members
        #: whose watch reported them gone (field ''), pods stored with a native gang field.
        self._checks: set[tuple[str, str, str, str, str]] = set()
        self._lock = threading.Lock()  # the informer thread adds, the pass takes
        #: uids of gated members already told that their PodGroup does not exist.
        self._missing_notified: set[str] = set()
        #: (namespace, name) -> the other status writers last logged for that PodGroup.
        self._foreign_logged: dict[tuple[str, str], tuple[str, ...]] = {}

    # -- pods that left their group ------------------------------------------
    def left(self, kind: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Members informer event: remember a gated, unbound member that is gone from the watch.

        A label-selector watch reports a pod whose group label was removed as DELETED, exactly
        like a deleted pod; a pod still watched whose label value became empty names no group
        either. :meth:`release` reads each back.
        """
        gone = old if kind == "DELETED" else (new if new is not None and not new.group else None)
        # Only the leader acts (its informer sees the same event); followers would only pile these up.
        if gone is not None and not gone.bound and gone.gated_by(self.gate) and self._leading():
            with self._lock:
                self._checks.add((gone.namespace, gone.name, gone.uid, (old or gone).group or "", ""))

    def native(self, pods: Iterable[PodInfo]) -> None:
        """Each pass (labelled pods as stored): remember each unbound pod, not being deleted, that
        carries cogate's gate and sets a native gang field (``PodInfo.native``); :meth:`release`
        reads it back. Only the leader acts."""
        if not self._leading():
            return
        found = {(p.namespace, p.name, p.uid, p.group or "", p.native) for p in pods
                 if p.native and not p.bound and not p.deleting and p.gated_by(self.gate)}
        if found:
            with self._lock:
                self._checks |= found

    @property
    def pending(self) -> bool:
        """Whether :meth:`release` has pods to check."""
        return bool(self._checks)

    def release(self) -> dict[str, str]:
        """Remove the gate from pods that left their group while gated and from pods stored with a
        native gang field (:meth:`native`), each read back first (:func:`~cogate.controller.planning.patches.left_group`,
        :func:`~cogate.controller.planning.patches.left_to_native`; else ``skipped``); ``{uid: writer result}``."""
        with self._lock:
            checks, self._checks = self._checks, set()
        out: dict[str, str] = {}
        for ns, name, uid, group, field in checks:
            out[uid] = self.writer.ungate(ns, name, uid, "", only_if=left_to_native if field else left_group,
                                          group=group)
            if out[uid] != WriteResult.REMOVED:
                continue
            if field:
                log.info("pod %s/%s sets %s, kept by the API server: Kubernetes gang scheduling places it, "
                         "gate removed", ns, name, field, extra=log_extra(ns, group))
                self.metrics.gate_removals.labels("native").inc()
                self.events.record(pod_ref(ns, name, uid), notices.native_gang_scheduling(field, group))
            else:
                log.info("pod %s/%s left PodGroup %s while gated: gate removed", ns, name, group,
                         extra=log_extra(ns, group))
                self.metrics.gate_removals.labels("left_group").inc()
                self.events.record(pod_ref(ns, name, uid), notices.left_pod_group(group))
        return out

    # -- pods whose PodGroup does not exist ------------------------------------
    def missing(self, groups: Mapping[tuple[str, str], GroupObject],
                members: Mapping[tuple[str, str], Sequence[PodInfo]]) -> None:
        """Tell each gated member of a ``(namespace, group)`` without a PodGroup, once."""
        waiting = waiting_for_pod_group(groups.keys(), members, self.gate)
        for p in waiting:
            if p.uid not in self._missing_notified:
                self.events.record(pod_ref(p.namespace, p.name, p.uid), notices.pod_group_not_found(p))
        self._missing_notified = {p.uid for p in waiting}

    # -- scheduler-plugins leftovers ---------------------------------------------
    def leftovers(self, groups: Mapping[tuple[str, str], GroupObject], now: float) -> None:
        """Report, on each PodGroup, status fields the API server dropped from cogate's writes and other
        managers writing its status (``now``: epoch seconds); forget what the writer remembers of
        deleted PodGroups."""
        dropped = self.writer.dropped
        foreign = 0
        for key, g in groups.items():
            fields = dropped.get(key)
            if fields:
                notice = notices.Notice(notices.WARNING, notices.Reason.STATUS_FIELDS_DROPPED,
                                        leftovers_mod.dropped_message(fields))
                self.events.emit(g.ref, "status-dropped", notice, now, key=",".join(fields))
            else:
                self.events.clear(g.uid, "status-dropped")
            writers = dict(g.status_writers)
            if writers:
                foreign += 1
                text = leftovers_mod.foreign_message(writers)
                if self._foreign_logged.get(key) != tuple(writers):
                    log.warning("PodGroup %s/%s: %s", *key, text, extra=log_extra(*key))
                self.events.emit(g.ref, "foreign-writer", notices.Notice(
                    notices.WARNING, notices.Reason.FOREIGN_STATUS_WRITER, text), now, key=",".join(writers))
            else:
                self.events.clear(g.uid, "foreign-writer")
        self._foreign_logged = {k: tuple(g.status_writers) for k, g in groups.items() if g.status_writers}
        self.metrics.foreign_status_writers.set(foreign)
        self.writer.forget_status(set(groups))

    # -- invalid objects -------------------------------------------------------
    def invalid_member(self, raw: dict[str, Any], exc: Exception) -> None:
        """Informer callback: a labelled pod failed conversion -> Warning InvalidObject on its PodGroup."""
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        group = labels.get(api.POD_GROUP_LABEL)
        ns = str(meta.get("namespace") or "")
        if not group or self.events.recorder is None:
            return
        g = self.podgroups.get((ns, group))
        ref = g.ref if g is not None else ObjectRef(ns, str(group))
        notice = notices.invalid_member(meta.get("name", "?"), exc)
        self.events.emit(ref, ("invalid", meta.get("uid")), notice, self._clock(), obj=ref.uid or ref.name)

    def invalid_podgroup(self, raw: dict[str, Any], exc: Exception) -> None:
        """Informer callback: a PodGroup failed validation -> Warning InvalidObject on it."""
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if self.events.recorder is None or not meta.get("name"):
            return
        ref = ObjectRef(str(meta.get("namespace") or ""), str(meta["name"]), str(meta.get("uid") or ""))
        notice = notices.invalid_podgroup(exc)
        self.events.emit(ref, "invalid-podgroup", notice, self._clock(), obj=ref.uid or ref.name)
