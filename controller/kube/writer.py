"""The controller's writes to the API server: PodGroup status, gate removal, eviction.

Every call goes through :mod:`cogate.kube` (``api_status``, ``json_body``, and
``retrying`` with a :class:`cogate.kube.Backoff` for transient errors: no status, 429,
5xx). Each write keeps only its own rule:

- status (merge patch of the status subresource, field manager
  :data:`cogate.controller.model.leftovers.FIELD_MANAGER`): 404 -> the PodGroup is gone; status fields
  the API server did not store (a CRD whose schema prunes them: scheduler-plugins' CRD left
  installed) are logged, counted and no longer sent for :data:`~cogate.controller.model.leftovers.RECHECK_SECONDS`
  (no write loop; :attr:`Writer.dropped` for the Warning event); while another manager owns
  status fields of a PodGroup, a write that records no release takes those fields back at most
  every :data:`~cogate.controller.model.leftovers.FOREIGN_WRITE_SECONDS` (the rest goes at once;
  :func:`cogate.controller.model.leftovers.to_write_now`);
- gate removal (one minimal JSON Patch per member, :func:`cogate.controller.planning.patches.release_patch`),
  first built from the members informer's record (no read) and guarded by a ``test`` of its
  ``metadata.resourceVersion``, so it applies only to exactly the pod that record describes; if
  that attempt fails for any reason, and on 409 Conflict or 422 (a failed ``test`` op) after a
  read -> re-read the pod and rebuild the patch (gate
  gone means someone else removed it: fine); 404, or a pod recreated under the same name ->
  the member is gone. A 422 on a pod that has not changed, a 400 or a 403 is the API server
  (an admission policy or webhook, validation) refusing the release: ``refused``, never
  retried here, the answer kept in :attr:`Writer.answers` for the condition and event;
- release check (:meth:`Writer.check_release`): the same patches sent with ``dryRun=All``
  concurrently, so that a refusal is known before any gate of the group is removed;
- eviction (``policy/v1`` Eviction with a uid precondition): 404/409 -> gone; no retry;
- deletion of a stuck member (uid precondition): 404/409 -> gone; no retry;
- preemption (:meth:`Writer.preempt`, :meth:`Writer.nominate`): strategic merge patches of a pod's
  status subresource (``DisruptionTarget``, ``nominatedNodeName``; uid in the body guards against a
  pod recreated under its name), then DELETE with a uid precondition: 404 -> gone; a preemption's
  nominations, then its victims, go concurrently on the same threads as gate removals
  (:meth:`Writer.nominate_all`, :meth:`Writer.preempt_all`);
- whole objects (PodTemplates, custom objects at coordinates the caller names, the opt-in
  PodDisruptionBudgets): :attr:`Writer.objects`, a :class:`cogate.controller.kube.objects.Objects`.

Results of writes are stored into the informer caches at once (``Informer.apply_local``), so
the next pass does not act on its own stale view. Each write answers a
:class:`~cogate.controller.kube.results.WriteResult` (a ``StrEnum``: it equals its old string, so
callers comparing with ``"removed"`` and the ``result`` label of the metrics are unchanged).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cogate import api
from cogate.controller.model import leftovers
from cogate.controller.model.config import DEFAULT_WORKERS
from cogate.controller.kube.metrics import Metrics
from cogate.controller.kube.objects import Objects
from cogate.controller.kube.results import REQUEST_TIMEOUT, WriteResult, answer_of
from cogate.controller.status.notices import log_extra
from cogate.controller.planning.patches import left_group, release_patch
from cogate.controller.model.records import PodInfo
from cogate.kube import Backoff, api_status, json_body, retrying

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

    from cogate.controller.kube.informer import Informer

log = logging.getLogger(__name__)

#: ``DisruptionTarget`` reason on a pod cogate preempts (kube-scheduler's is ``PreemptionByScheduler``).
PREEMPTION_REASON = "PreemptionByCogate"

#: Results of :meth:`Writer.ungate` (also the ``result`` label of ``cogate_gate_removals_total``).
UNGATE_RESULTS = (WriteResult.REMOVED, WriteResult.ABSENT, WriteResult.NOT_FOUND, WriteResult.SKIPPED,
                  WriteResult.REFUSED, WriteResult.FAILED, WriteResult.STOPPED)
#: Seconds a dry-run-validated release patch may be sent without reading the pod again.
VALIDATED_FOR = 30.0
#: Statuses of a release patch that mean the API server refuses it (not a changed pod, not transient).
REFUSAL_STATUSES = (400, 403, 422)


class Refused(Exception):
    """The API server refused a release patch; ``answer`` is its message."""

    def __init__(self, answer: str, status: int | None) -> None:
        super().__init__(answer)
        self.answer = answer
        self.status = status


class Writer:
    """Writes decisions through ``core``/``custom`` (``CoreV1Api``, ``CustomObjectsApi`` or fakes
    with the same methods), updating the ``podgroups`` and ``members`` informer caches with the
    objects written. ``attempts`` bounds each write's tries; ``sleep`` is injectable (tests).
    Gate removals of one release run concurrently on ``workers`` threads."""

    def __init__(self, core: CoreV1Api, custom: CustomObjectsApi, *, podgroups: Informer, members: Informer,
                 gate: str, attempts: int, metrics: Metrics, workers: int = DEFAULT_WORKERS,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.core = core
        self.custom = custom
        #: Creates, reads and deletes whole objects (PodTemplates, custom objects, PodDisruptionBudgets).
        self.objects = Objects(core, custom)
        self.podgroups = podgroups
        self.members = members
        self.gate = gate
        self.attempts = attempts
        self.metrics = metrics
        self._sleep = sleep
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, "cogate-ungate")
        #: Set by :meth:`stop_releasing`: no gate patch is sent any more.
        self._stopping = threading.Event()
        #: uid -> the API server's answer to the last refused release patch of that member.
        self.answers: dict[str, str] = {}
        #: uid -> (node, resourceVersion, ops, monotonic time) of a release patch a dry run accepted;
        #: used once, within :data:`VALIDATED_FOR` seconds.
        self._validated: dict[str, tuple[str, str, list[dict[str, Any]], float]] = {}
        self._monotonic = monotonic
        #: (namespace, name) -> (status fields the API server dropped from our last full write, monotonic
        #: time of that write); those fields are not sent again until ``leftovers.RECHECK_SECONDS`` later.
        self._dropped: dict[tuple[str, str], tuple[tuple[str, ...], float]] = {}
        #: (namespace, name) -> monotonic time of our last write of status fields another manager owns.
        self._last_status_write: dict[tuple[str, str], float] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop_releasing(self) -> None:
        """From now on :meth:`ungate` sends no patch and answers ``stopped`` (the patches already sent
        finish). Called on SIGTERM, before the last pass is waited for: a release is recorded in the
        PodGroup's status before its gates go, so the next leader finishes it; the pass in flight ends
        within one patch per worker and the Lease is given up at once instead of expiring."""
        self._stopping.set()

    # -- status ------------------------------------------------------------------
    @property
    def dropped(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(namespace, name) -> the status fields the API server dropped from our writes (a copy)."""
        return {k: v[0] for k, v in list(self._dropped.items())}

    def forget_status(self, live: set[tuple[str, str]]) -> None:
        """Forget what is remembered of status writes to PodGroups not in ``live`` (deleted)."""
        for store in (self._dropped, self._last_status_write):
            for key in [k for k in list(store) if k not in live]:
                store.pop(key, None)

    def write_status(self, namespace: str, name: str, body: dict[str, Any]) -> bool:
        """Merge-patch PodGroup ``namespace/name``'s status subresource with ``body``; True when written,
        or when nothing is to be written now: every changed field is one the API server drops (it is
        sent again after ``leftovers.RECHECK_SECONDS``), or the only changes are fields another manager
        owns, taken back at most every ``leftovers.FOREIGN_WRITE_SECONDS`` (``leftovers.to_write_now``)."""
        key = (namespace, name)
        now = self._monotonic()
        dropped = self._dropped.get(key)
        if dropped is not None and now - dropped[1] < leftovers.RECHECK_SECONDS:
            trimmed = leftovers.without(body, dropped[0])
            if trimmed is None:
                return True
            body = trimmed
        g = self.podgroups.get(key)
        contested = sorted({f for fs in (getattr(g, "status_writers", None) or {}).values() for f in fs})
        now_body = leftovers.to_write_now(body, contested, self._last_status_write.get(key), now)
        if now_body is None:
            return True
        takes_back = any(f in now_body.get("status", {}) for f in contested)
        body = now_body

        try:
            resp = self._merge_patch_group(self.custom.patch_namespaced_custom_object_status, namespace, name, body)
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) == 404:
                return False
            self.metrics.status_writes.labels(WriteResult.ERROR).inc()
            log.warning("status patch of PodGroup %s/%s failed: %s", namespace, name, exc,
                        extra=log_extra(namespace, name))
            return False
        self.metrics.status_writes.labels(WriteResult.OK).inc()
        if takes_back:
            self._last_status_write[key] = now
        try:
            stored = json_body(resp)
        except ValueError:
            stored = {}
        if stored:
            self._check_stored(key, body, stored, now, full=dropped is None or now - dropped[1] >= leftovers.RECHECK_SECONDS)
            self.podgroups.apply_local(stored)
        return True

    def _merge_patch_group(self, method: Callable[..., Any], namespace: str, name: str, body: dict[str, Any]) -> Any:
        """One JSON merge patch of PodGroup ``namespace/name`` by ``method`` (the object or its status
        subresource), as cogate's field manager, retried (:func:`cogate.kube.retrying`); the raw response."""
        return retrying(lambda: method(api.GROUP, api.VERSION, namespace, api.PLURAL, name, body,
                                       _content_type="application/merge-patch+json", _preload_content=False,
                                       _request_timeout=REQUEST_TIMEOUT, field_manager=leftovers.FIELD_MANAGER),
                        attempts=self.attempts, backoff=Backoff(initial=0.2, maximum=2.0), sleep=self._sleep)

    def annotate_group(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> bool:
        """Merge-patch PodGroup ``namespace/name``'s ``metadata.annotations`` with ``annotations``
        (``None`` removes one); True when written. A PodGroup gone (404) or a failure after the retries
        is False (logged; the next pass tries again: the caller compares with the cached object)."""
        body = {"metadata": {"annotations": dict(annotations)}}

        try:
            resp = self._merge_patch_group(self.custom.patch_namespaced_custom_object, namespace, name, body)
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) != 404:
                log.warning("annotating PodGroup %s/%s failed: %s", namespace, name, exc,
                            extra=log_extra(namespace, name))
            return False
        try:
            stored = json_body(resp)
        except ValueError:
            stored = {}
        if stored:
            self.podgroups.apply_local(stored)
        return True

    def _check_stored(self, key: tuple[str, str], body: Mapping[str, Any], stored: Mapping[str, Any], now: float,
                      *, full: bool) -> None:
        """Compare what a status write sent with what the API server stored (``stored``: the object the
        PATCH returned); remember, count and log the fields it dropped (once per PodGroup, and when it
        keeps them again). ``full``: the body had every field (not trimmed by an earlier drop)."""
        if not full:
            return
        fields = leftovers.dropped_status_fields(body.get("status"), stored.get("status"))
        before = self._dropped.get(key)
        if fields:
            self._dropped[key] = (fields, now)
            for f in fields:
                self.metrics.status_fields_dropped.labels(f).inc()
            if before is None or before[0] != fields:
                log.error("PodGroup %s/%s: %s", *key, leftovers.dropped_message(fields), extra=log_extra(*key))
        elif before is not None:
            del self._dropped[key]
            log.info("PodGroup %s/%s: the API server stores cogate's whole status again", *key,
                     extra=log_extra(*key))

    # -- gates -------------------------------------------------------------------
    def ungate_members(self, release: Mapping[str, str],
                       annotations: Mapping[str, str] | None = None) -> dict[str, WriteResult]:
        """Remove the gate from each member (uid -> node to pin to, '' for none) concurrently; uid -> result.

        A member whose patch :meth:`check_release` validated is patched at once with that patch,
        guarded by a ``test`` of the resourceVersion it was built from (no second read); if the
        pod changed meanwhile (422/409), it is read again and the patch rebuilt (:meth:`ungate`).
        ``annotations``: set on every member in the same patch (``patches.annotation_ops``: the
        consume-provisioning-request annotation of a group released on provisioned nodes)."""
        return self._each(release, dry_run=False, annotations=annotations)

    def check_release(self, release: Mapping[str, str]) -> dict[str, WriteResult]:
        """Send each member's release patch with ``dryRun=All`` (nothing changes), concurrently:
        uid -> ``ok``, ``refused`` (answer in :attr:`answers`), ``absent``, ``not_found`` or
        ``failed`` (the API server could not be asked: the release goes ahead and is checked
        by the real patch)."""
        cutoff = time.monotonic() - VALIDATED_FOR
        for uid in [u for u, v in list(self._validated.items()) if v[3] < cutoff]:
            self._validated.pop(uid, None)
        return self._each(release, dry_run=True)

    def _each(self, release: Mapping[str, str], *, dry_run: bool,
              annotations: Mapping[str, str] | None = None) -> dict[str, WriteResult]:
        futures = {}
        for uid, node in release.items():
            p = self.members.get(uid)
            if p is None:
                if not dry_run:
                    self.metrics.gate_removals.labels(WriteResult.NOT_FOUND).inc()
                continue
            futures[uid] = (p, self._pool.submit(self.ungate, p.namespace, p.name, uid, node, group=p.group or "",
                                                 dry_run=dry_run, cached=p, annotations=annotations))
        out: dict[str, WriteResult] = {}
        for uid, (p, f) in futures.items():
            try:
                out[uid] = f.result()
            except Exception:  # noqa: BLE001
                log.exception("ungating pod %s/%s (uid %s) failed", p.namespace, p.name, uid,
                              extra=log_extra(p.namespace, p.group or ""))
                out[uid] = WriteResult.FAILED
            if not dry_run:
                self.metrics.gate_removals.labels(out[uid]).inc()
        return out

    def ungate(self, namespace: str, name: str, uid: str, node: str,
               only_if: Callable[[dict[str, Any]], bool] | None = None, *, group: str = "",
               dry_run: bool = False, cached: PodInfo | None = None,
               annotations: Mapping[str, str] | None = None) -> WriteResult:
        """Remove the gate from one pod, pinning it to ``node`` ('' for none); one of :data:`UNGATE_RESULTS`.

        Steps: 1. a patch known without a read (:meth:`_known_ops`: one a dry run validated, or
        built from ``cached``, the members informer's record carrying its resourceVersion and
        affinity, :func:`cached_release_ops`); 2. that patch sent once, guarded by a ``test`` of
        the resourceVersion (:meth:`_patch_known`); 3. otherwise, or when it fails, read the pod
        and patch (:meth:`_patch_read`; 409/422: read and patch again, up to ``attempts``);
        4. the outcome told apart (refused, gone, failed).
        ``only_if``: a predicate on the freshly read pod (API JSON); ``skipped`` when it is false
        (the pod is always read then).
        ``group``: the PodGroup the pod belongs (or belonged) to, for log lines. ``dry_run``: send
        the patch with ``dryRun=All`` (nothing is changed); ``ok`` instead of ``removed``.
        ``annotations``: set in the same patch (:func:`cogate.controller.planning.patches.annotation_ops`); the
        pod is then always read first (the informer's record does not keep annotations).
        ``refused``: the API server refused the patch (:data:`REFUSAL_STATUSES` on an unchanged
        pod); its answer is in :attr:`answers` under ``uid``. ``stopped``: not sent, after
        :meth:`stop_releasing`.
        """
        if self._stopping.is_set() and not dry_run:
            return WriteResult.STOPPED
        extra = log_extra(namespace, group) if group else None
        known = self._known_ops(uid, node, only_if, dry_run=dry_run, cached=cached, annotations=annotations)
        if known is not None:
            done = self._patch_known(namespace, name, uid, node, known, dry_run=dry_run)
            if done is not None:
                return done
        try:
            # 409/422: re-read; a 422 from the test op usually means the gate is gone already.
            result = retrying(lambda: self._patch_read(namespace, name, uid, node, only_if, extra, dry_run=dry_run,
                                                       annotations=annotations),
                              attempts=self.attempts, backoff=Backoff(initial=0.2, maximum=5.0),
                              again=lambda exc: api_status(exc) in (409, 422) and not isinstance(exc, Refused),
                              sleep=self._sleep)
            self.answers.pop(uid, None)
            return result
        except Refused as exc:
            self.answers[uid] = exc.answer
            log.warning("the API server refused the release patch%s of pod %s/%s: %s",
                        " (dry run)" if dry_run else "", namespace, name, exc.answer, extra=extra)
            return WriteResult.REFUSED
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) == 404:
                return WriteResult.NOT_FOUND
            log.warning("ungating pod %s/%s failed: %s", namespace, name, exc, extra=extra)
            return WriteResult.FAILED

    def _known_ops(self, uid: str, node: str, only_if: Callable[[dict[str, Any]], bool] | None, *, dry_run: bool,
                   cached: PodInfo | None,
                   annotations: Mapping[str, str] | None) -> tuple[str, list[dict[str, Any]]] | None:
        """Step 1 of :meth:`ungate`: ``(resourceVersion, ops)`` of a release patch known without a
        read: the one a dry run validated for ``node`` within :data:`VALIDATED_FOR` seconds (taken:
        used once; never for a dry run or with ``annotations``), else one built from ``cached``
        (without ``only_if`` and ``annotations``); ``None``: the pod is to be read."""
        validated = None if dry_run or annotations else self._validated.pop(uid, None)
        if validated is not None and validated[0] == node and time.monotonic() - validated[3] < VALIDATED_FOR:
            return validated[1], validated[2]
        if only_if is None and not annotations and cached is not None and cached.uid == uid:
            return cached_release_ops(cached, self.gate, node)
        return None

    def _patch_known(self, namespace: str, name: str, uid: str, node: str, known: tuple[str, list[dict[str, Any]]],
                     *, dry_run: bool) -> WriteResult | None:
        """Step 2 of :meth:`ungate`: send ``known`` once, guarded by a ``test`` of its resourceVersion
        (it applies only to exactly the pod it was built from); ``ok`` (a dry run, remembered as
        validated) or ``removed``, or ``None`` when it failed for any reason: changed meanwhile,
        refused, or anything else, which the read path (step 3) tells apart."""
        rv, ops = known
        guarded = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, *ops]
        try:
            resp = self._json_patch(namespace, name, guarded, dry_run=dry_run)
            self.answers.pop(uid, None)
            if dry_run:
                self._validated[uid] = (node, rv, ops, time.monotonic())
                return WriteResult.OK
            self._remember(self.members, resp, keep=_still_member)
            return WriteResult.REMOVED
        except Exception:  # noqa: BLE001 - the full path reads the pod and tells the failures apart
            return None

    def _patch_read(self, namespace: str, name: str, uid: str, node: str,
                    only_if: Callable[[dict[str, Any]], bool] | None, extra: dict[str, str] | None, *,
                    dry_run: bool, annotations: Mapping[str, str] | None) -> WriteResult:
        """Step 3 of :meth:`ungate`, one try: read the pod (``not_found`` when recreated under its name,
        ``skipped`` when ``only_if`` says no, ``absent`` without the gate), build the release patch
        from it and send it; raises :class:`Refused` when the API server refuses the patch itself,
        the API error otherwise (the retry loop re-reads on 409/422)."""
        pod = self.objects.fetch_pod(namespace, name)
        if (pod.get("metadata") or {}).get("uid") != uid:
            return WriteResult.NOT_FOUND  # deleted and recreated under the same name
        if only_if is not None and not only_if(pod):
            return WriteResult.SKIPPED
        ops = self._release_ops(pod, namespace, name, node, extra, annotations)
        if ops is None:
            return WriteResult.ABSENT
        try:
            resp = self._json_patch(namespace, name, ops, dry_run=dry_run)
        except Exception as exc:  # noqa: BLE001
            self._raise_refusal(exc, pod, lambda: self.objects.fetch_pod(namespace, name))
            raise
        if dry_run:
            rv = (pod.get("metadata") or {}).get("resourceVersion")
            if rv:
                self._validated[uid] = (node, str(rv), ops, time.monotonic())
            return WriteResult.OK
        self._remember(self.members, resp, keep=_still_member)
        return WriteResult.REMOVED

    def _json_patch(self, namespace: str, name: str, ops: list[dict[str, Any]], *, dry_run: bool) -> Any:
        """Send JSON Patch ``ops`` to pod ``namespace/name`` (``dryRun=All`` when ``dry_run``)."""
        kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        return self.core.patch_namespaced_pod(name, namespace, ops, _content_type="application/json-patch+json",
                                              _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)

    def _raise_refusal(self, exc: BaseException, pod: dict[str, Any], read: Callable[[], dict[str, Any]]) -> None:
        """Raise :class:`Refused` when ``exc`` (from patching ``pod``) is the API server refusing the
        patch itself: 400 or 403, or 422 while the pod is unchanged (a failed ``test`` op means it
        changed: then the caller re-reads and rebuilds)."""
        status = api_status(exc)
        if status not in REFUSAL_STATUSES:
            return
        if status == 422:
            try:
                fresh = read()
            except Exception:  # noqa: BLE001 - the retry loop re-reads anyway
                return
            rv = (pod.get("metadata") or {}).get("resourceVersion")
            if not rv or (fresh.get("metadata") or {}).get("resourceVersion") != rv:
                return
        raise Refused(answer_of(exc), status) from exc

    def _release_ops(self, pod: dict[str, Any], namespace: str, name: str, node: str,
                     extra: dict[str, str] | None,
                     annotations: Mapping[str, str] | None = None) -> list[dict[str, Any]] | None:
        try:
            return release_patch(pod, self.gate, node, annotations)
        except ValueError as exc:
            log.warning("pod %s/%s: cannot pin (%s); removing the gate only", namespace, name, exc, extra=extra)
            return release_patch(pod, self.gate, "", annotations)

    # -- eviction ----------------------------------------------------------------
    def evict(self, p: PodInfo) -> WriteResult:
        """Evict member ``p`` (uid precondition); ``evicted``, ``gone`` (404/409) or ``failed``, counted."""
        result = self._evict(p)
        self.metrics.evictions.labels(result).inc()
        return result

    def _evict(self, p: PodInfo) -> WriteResult:
        from kubernetes import client

        body = client.V1Eviction.from_dict({"apiVersion": "policy/v1", "kind": "Eviction",
                                            "metadata": {"name": p.name, "namespace": p.namespace},
                                            "deleteOptions": {"preconditions": {"uid": p.uid}}})
        try:
            self.core.create_namespaced_pod_eviction(p.name, p.namespace, body, _preload_content=False,
                                                     _request_timeout=REQUEST_TIMEOUT)
            return WriteResult.EVICTED
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) in (404, 409):
                return WriteResult.GONE
            log.warning("evicting %s/%s failed: %s", p.namespace, p.name, exc,
                        extra=log_extra(p.namespace, p.group or ""))
            return WriteResult.FAILED

    # -- stuck members -----------------------------------------------------------
    def delete(self, p: PodInfo) -> WriteResult:
        """Delete member ``p`` (uid precondition: never a pod recreated under its name); ``deleted``,
        ``gone`` (404/409) or ``failed``. An unbound pod is removed at once by the API server."""
        result, _ = self._delete(p)
        self.metrics.stuck_deletions.labels(result).inc()
        return result

    def _delete(self, p: PodInfo) -> tuple[WriteResult, float | None]:
        """DELETE pod ``p`` with a uid precondition and default options (its own grace period);
        the result and the ``metadata.deletionGracePeriodSeconds`` the API server answered (None
        when unknown)."""
        from kubernetes import client

        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=p.uid))
        try:
            resp = self.core.delete_namespaced_pod(p.name, p.namespace, body=body, _preload_content=False,
                                                   _request_timeout=REQUEST_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) in (404, 409):
                return WriteResult.GONE, None
            log.warning("deleting %s/%s failed: %s", p.namespace, p.name, exc,
                        extra=log_extra(p.namespace, p.group or ""))
            return WriteResult.FAILED, None
        try:
            grace = (json_body(resp).get("metadata") or {}).get("deletionGracePeriodSeconds")
        except (ValueError, AttributeError, TypeError):
            grace = None
        return WriteResult.DELETED, float(grace) if isinstance(grace, int | float) else None

    # -- preemption (issue 15) -----------------------------------------------------
    def patch_pod_status(self, p: PodInfo, status: dict[str, Any]) -> WriteResult:
        """Strategic-merge-patch pod ``p``'s status subresource with ``status`` (conditions merge by
        ``type``), field manager :data:`~cogate.controller.model.leftovers.FIELD_MANAGER`, guarded by
        ``p``'s uid (a pod recreated under its name is not touched); ``ok``, ``gone`` (404, or
        another uid: 409/422) or ``failed``. Transient errors are retried."""
        body = {"metadata": {"uid": p.uid}, "status": status}

        def patch() -> Any:
            return self.core.patch_namespaced_pod_status(
                p.name, p.namespace, body, _content_type="application/strategic-merge-patch+json",
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT, field_manager=leftovers.FIELD_MANAGER)

        try:
            resp = retrying(patch, attempts=self.attempts, backoff=Backoff(initial=0.2, maximum=2.0),
                            sleep=self._sleep)
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) in (404, 409, 422):
                return WriteResult.GONE
            log.warning("patching the status of pod %s/%s failed: %s", p.namespace, p.name, exc,
                        extra=log_extra(p.namespace, p.group or ""))
            return WriteResult.FAILED
        if p.group:
            self._remember(self.members, resp, keep=_still_member)
        return WriteResult.OK

    def nominate(self, p: PodInfo, node: str) -> WriteResult:
        """Set gated member ``p``'s ``status.nominatedNodeName`` to ``node`` ('' clears it): room
        held for it there in kube-scheduler's nominator (KEP-5278: an external component may set it;
        the one who set it clears it). See :meth:`patch_pod_status`."""
        return self.patch_pod_status(p, {"nominatedNodeName": node or None})

    def nominate_all(self, nominations: Sequence[tuple[PodInfo, str]]) -> list[WriteResult]:
        """:meth:`nominate` each ``(pod, node)`` concurrently on the writer's threads (at most
        ``workers`` requests in flight); the results in the order given. Returns only once every
        nomination is answered, so that a caller deleting victims next deletes none before every
        nomination is in place (docs/semantics.md "Preemption"). An unexpected error is ``failed``."""
        return self._concurrently([lambda p=p, node=node: self.nominate(p, node) for p, node in nominations],
                                  WriteResult.FAILED, "nominating")

    def preempt_all(self, pods: Sequence[PodInfo], message: str, now: str) -> list[tuple[WriteResult, float | None]]:
        """:meth:`preempt` each of ``pods`` concurrently on the writer's threads (at most ``workers``
        requests in flight; each pod's mark still precedes its DELETE); the results in the order
        given, once every one is answered. One at a time took 88 ms a victim on a loaded 2-core
        machine: 17.6 s for the 200 victims of a gang of 100 (issue 15 item 6, docs/benchmarks.md)."""
        return self._concurrently([lambda p=p: self.preempt(p, message, now) for p in pods],
                                  (WriteResult.FAILED, None), "preempting")

    def _concurrently(self, calls: Sequence[Callable[[], Any]], failed: Any, what: str) -> list[Any]:
        """Run ``calls`` on the pool; their results in order, ``failed`` for one that raised."""
        futures = [self._pool.submit(c) for c in calls]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except Exception:  # noqa: BLE001 - one odd answer must not stop the others
                log.exception("%s a pod failed", what)
                out.append(failed)
        return out

    def preempt(self, p: PodInfo, message: str, now: str) -> tuple[WriteResult, float | None]:
        """Preempt pod ``p`` as kube-scheduler's DefaultPreemption does (``PreemptPod``): unless it
        is already terminating, a status patch adding ``DisruptionTarget=True``, reason
        :data:`PREEMPTION_REASON`, ``message``, ``lastTransitionTime`` ``now`` (RFC 3339; without it
        the disruption controller resets the condition at once), then a DELETE with a uid
        precondition and the pod's own grace period. Never the Eviction API (docs/semantics.md
        "Preemption": it refuses where a PDB has no disruption left, 429, and overwrites the reason).
        ``(deleted | gone | failed, deletionGracePeriodSeconds or None)``, counted in
        ``cogate_controller_preemption_victims_total{result}``."""
        if not p.deleting:
            marked = self.patch_pod_status(p, {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": PREEMPTION_REASON, "message": message,
                "lastTransitionTime": now}]})
            if marked == WriteResult.GONE:
                self.metrics.preemption_victims.labels(WriteResult.GONE).inc()
                return WriteResult.GONE, None
            result, grace = self._delete(p)
        else:
            result, grace = WriteResult.DELETED, None  # terminating already: no API call (as kube-scheduler)
        self.metrics.preemption_victims.labels(result).inc()
        return result, grace

    # -- caches ------------------------------------------------------------------
    @staticmethod
    def _remember(cache: Informer, resp: Any, keep: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Store the object a write returned into ``cache`` (best effort: a body that is not a
        JSON object is ignored, the watch brings the object anyway)."""
        try:
            raw = json_body(resp)
        except ValueError:
            return
        if raw and (keep is None or keep(raw)):
            cache.apply_local(raw)


def cached_release_ops(p: PodInfo, gate: str, node: str) -> tuple[str, list[dict[str, Any]]] | None:
    """``(resourceVersion, ops)``: the release patch of member ``p`` built from its informer record
    (its gates in order and its ``spec.affinity`` as received) instead of a fresh read, or ``None``
    when the record cannot stand for the pod: no resourceVersion, already bound, ``gate`` not among
    its gates, or an affinity :func:`cogate.controller.planning.patches.pin_ops` refuses (the read path then
    logs and releases unpinned). The caller guards the ops with a ``test`` of the resourceVersion,
    so they apply to exactly the pod the record was made from (otherwise 422, nothing changed)."""
    if not p.resource_version or p.bound or gate not in p.gates:
        return None
    spec: dict[str, Any] = {"schedulingGates": [{"name": g} for g in p.gates]}
    if p.affinity is not None:
        spec["affinity"] = p.affinity
    try:
        ops = release_patch({"spec": spec}, gate, node)
    except ValueError:
        return None
    return (p.resource_version, ops) if ops is not None else None


def _still_member(pod: Mapping[str, Any]) -> bool:
    return not left_group(pod)
