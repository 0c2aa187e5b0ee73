"""Informers: list + watch one kind of object into an in-memory cache of small records.

An :class:`Informer` runs in its own thread (the official ``kubernetes`` client is
synchronous) and keeps ``store: dict[key, record]`` current:

1. **list** all objects (raw JSON, ``_preload_content=False``; the client's models drop
   fields they do not know), convert each with ``convert`` and replace the store, calling
   the add/update/delete handlers for the differences; remember the list's
   ``metadata.resourceVersion``;
2. **watch** from that resourceVersion with ``allowWatchBookmarks=true``; ADDED/MODIFIED/
   DELETED update the store and call the handlers, BOOKMARK only advances the
   resourceVersion;
3. on **410 Gone** (an ``ERROR`` event with code 410 or an HTTP 410; the resourceVersion
   is older than the apiserver's watch cache) relist — client-go's reflector rule;
4. on any other error (connection reset, 5xx, 429, undecodable line) wait with
   exponential backoff plus jitter (0.5 s doubling to 30 s, +-20 %), then resume the
   watch from the last resourceVersion; the backoff resets after an event is received.

The list and watch are injectable callables (:data:`ListFn`, :data:`WatchFn`) so the
relist/reconnect logic is tested against a fake stream source; :func:`pod_source`,
:func:`node_source`, :func:`claim_source`, :func:`volume_source` and :func:`podgroup_source`
build them from the official client.

An object that fails conversion (``convert`` raises ``ValueError``, e.g.
``records.InvalidObject`` or a pydantic ``ValidationError``) is dropped from the store (a
stale record would lie), reported to ``on_invalid(raw_object, error)`` and counted; the
informer never crashes on odd objects.

:class:`Caches` bundles the informers a reconcile pass reads.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cogate.kube import Backoff, api_status

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api, CustomObjectsApi

log = logging.getLogger(__name__)

#: ``list_fn() -> (items, resourceVersion)``: raw JSON dicts and the list's resourceVersion.
ListFn = Callable[[], tuple[list[dict[str, Any]], str]]
#: ``watch_fn(resource_version) -> iterable of {"type": ..., "object": dict}`` (one watch
#: connection; the iterable ends when the server closes it).
WatchFn = Callable[[str], Iterable[dict[str, Any]]]
Handler = Callable[[str, Any, Any], None]  # (event type "ADDED"/"MODIFIED"/"DELETED", old, new)

#: Server-side watch timeout (seconds); jittered so informers do not reconnect in lockstep.
WATCH_TIMEOUT_SECONDS = 300
#: Client read timeout (seconds): longer than the server timeout; bookmarks arrive ~1/min.
READ_TIMEOUT_SECONDS = 360
#: Items per list page (``limit`` + ``continue``), as client-go's pager.
LIST_PAGE_SIZE = 500


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 / ERROR event code 410): relist."""


class Informer:
    """List + watch one resource into ``store`` (key -> converted record).

    ``key(raw) -> Hashable`` keys a raw object (uid for pods, name for nodes,
    (namespace, name) for PodGroups); ``convert(raw) -> record`` raises ``ValueError``
    on a bad object; ``handler(type, old_record, new_record)`` is called for every change
    (``old`` None on ADDED, ``new`` None on DELETED) from the informer's thread.
    ``sleep(seconds, stop) -> None`` is injectable for tests (default waits on ``stop``).
    """

    def __init__(
        self,
        name: str,
        list_fn: ListFn,
        watch_fn: WatchFn,
        key: Callable[[dict[str, Any]], Hashable],
        convert: Callable[[dict[str, Any]], Any],
        *,
        handler: Handler | None = None,
        on_invalid: Callable[[dict[str, Any], Exception], None] | None = None,
        on_watch_restart: Callable[[str], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        backoff: Backoff | None = None,
        sleep: Callable[[float, threading.Event], None] | None = None,
    ) -> None:
        self.name = name
        self._list = list_fn
        self._watch = watch_fn
        self._key = key
        self._convert = convert
        self._handlers: list[Handler] = [handler] if handler else []
        self.on_invalid = on_invalid
        self._on_watch_restart = on_watch_restart
        self._on_event = on_event
        self._backoff = backoff or Backoff()
        self._sleep = sleep or (lambda seconds, stop: stop.wait(seconds))
        self.lock = threading.RLock()
        self.store: dict[Hashable, Any] = {}
        self.resource_version = ""
        self._synced = threading.Event()
        self._healthy = False
        self._thread: threading.Thread | None = None

    # -- public API -------------------------------------------------------
    @property
    def has_synced(self) -> bool:
        """True once the first list has been stored."""
        return self._synced.is_set()

    @property
    def healthy(self) -> bool:
        """True while the store follows the API server: from a successful list until a list or
        watch fails (then False until the next successful list or watch event). A store that
        is not healthy may miss objects created meanwhile."""
        return self._healthy and self._synced.is_set()

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def snapshot(self) -> list[Any]:
        """A copy of the current records (consistent: taken under the store lock)."""
        with self.lock:
            return list(self.store.values())

    def get(self, key: Hashable) -> Any:
        with self.lock:
            return self.store.get(key)

    def snapshot_map(self) -> dict[Hashable, Any]:
        """A copy of the store (key -> record), taken under the store lock."""
        with self.lock:
            return dict(self.store)

    def apply_local(self, raw: dict[str, Any]) -> None:
        """Store an object this process just wrote (a PATCH response) without waiting for the watch.

        Ignored if the store already holds a newer resourceVersion (etcd revisions are
        integers; non-numeric versions always replace). Invalid objects are ignored.
        """
        try:
            key = self._key(raw)
            record = self._convert(raw)
        except (ValueError, TypeError, KeyError):
            return
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        with self.lock:
            old = self.store.get(key)
            if not _newer(rv, old):
                return
            self.store[key] = record
        self._notify("MODIFIED" if old is not None else "ADDED", old, record)

    def forget_local(self, key: Hashable) -> None:
        """Drop the record of an object this process just deleted without waiting for the watch
        (a later event of the object, still in flight, may bring it back until its DELETED arrives)."""
        with self.lock:
            old = self.store.pop(key, None)
        if old is not None:
            self._notify("DELETED", old, None)

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run :meth:`run` in a daemon thread."""
        self._thread = threading.Thread(target=self.run, args=(stop,), name=f"informer-{self.name}", daemon=True)
        self._thread.start()
        return self._thread

    def run(self, stop: threading.Event) -> None:
        """List, then watch until ``stop`` is set; relist on 410, back off on errors. Never raises."""
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                self._watch_once(stop)
                # A clean end of stream (server timeout): reconnect at once from the last RV.
            except Gone:
                log.info("informer %s: resourceVersion %s expired (410), relisting", self.name, self.resource_version)
                self._restarted("gone")
                need_list = True
            except Exception as exc:  # noqa: BLE001 - an informer must outlive any error
                self._healthy = False
                if api_status(exc) == 410:
                    self._restarted("gone")
                    need_list = True
                    continue
                delay = self._backoff.next()
                log.warning("informer %s: %s: %s; retrying in %.1fs", self.name, type(exc).__name__, exc, delay)
                self._restarted("error")
                if not self.resource_version:
                    need_list = True
                self._sleep(delay, stop)

    # -- internals ----------------------------------------------------------
    def _restarted(self, reason: str) -> None:
        if self._on_watch_restart:
            self._on_watch_restart(reason)

    def _notify(self, kind: str, old: Any, new: Any) -> None:
        for handler in self._handlers:
            try:
                handler(kind, old, new)
            except Exception:  # noqa: BLE001
                log.exception("informer %s: handler failed", self.name)

    def _convert_or_report(self, raw: dict[str, Any]) -> tuple[bool, Any]:
        try:
            return True, self._convert(raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            meta = raw.get("metadata") if isinstance(raw, dict) else None
            meta = meta if isinstance(meta, dict) else {}
            log.warning("informer %s: invalid object %s/%s: %s", self.name, meta.get("namespace", ""), meta.get("name", "?"), exc)
            if self.on_invalid:
                try:
                    self.on_invalid(raw, exc)
                except Exception:  # noqa: BLE001
                    log.exception("informer %s: on_invalid failed", self.name)
            return False, None

    def _relist(self) -> None:
        items, rv = self._list()
        fresh: dict[Hashable, Any] = {}
        for raw in items:
            try:
                key = self._key(raw)
            except (ValueError, TypeError, KeyError, AttributeError):
                log.warning("informer %s: object without a key skipped", self.name)
                continue
            ok, record = self._convert_or_report(raw)
            if ok:
                fresh[key] = record
        with self.lock:
            old_store = self.store
            self.store = fresh
            self.resource_version = rv
        for key, record in fresh.items():
            old = old_store.get(key)
            if old is None:
                self._notify("ADDED", None, record)
            elif old != record:
                self._notify("MODIFIED", old, record)
        for key, old in old_store.items():
            if key not in fresh:
                self._notify("DELETED", old, None)
        self._synced.set()
        self._healthy = True
        if self._on_event:
            self._on_event("LIST")

    def _watch_once(self, stop: threading.Event) -> None:
        stream = self._watch(self.resource_version)
        try:
            for event in stream:
                if stop.is_set():
                    return
                self._handle_event(event)
        finally:
            close = getattr(stream, "close", None)
            if close:
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass

    def _handle_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        raw = event.get("object")
        if not isinstance(raw, dict):
            raise ValueError(f"watch event without an object: {str(event)[:200]}")
        if kind == "ERROR":
            code = raw.get("code")
            if code == 410:
                raise Gone(raw.get("message", ""))
            raise RuntimeError(f"watch ERROR event: {raw.get('code')} {raw.get('reason')}: {raw.get('message')}")
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        self._healthy = True
        if self._on_event:
            self._on_event(str(kind))
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            self._backoff.reset()
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise ValueError(f"unknown watch event type {kind!r}")
        try:
            key = self._key(raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # Skip it (as a relist does) and move on: retrying would replay the same event.
            log.warning("informer %s: %s event without a usable key (%s); skipped", self.name, kind, exc)
            with self.lock:
                if rv:
                    self.resource_version = rv
            return
        if kind == "DELETED":
            with self.lock:
                old = self.store.pop(key, None)
                if rv:
                    self.resource_version = rv
            if old is not None:
                self._notify("DELETED", old, None)
        else:
            ok, record = self._convert_or_report(raw)
            with self.lock:
                old = self.store.get(key)
                if rv:
                    self.resource_version = rv
                # An event older than what apply_local stored from our own write: keep ours.
                stale = ok and not _newer(rv, old)
                if ok and not stale:
                    self.store[key] = record
                elif not ok:
                    self.store.pop(key, None)
            if ok and not stale and old != record:
                # Records hold only what the planner needs: an unchanged one (e.g. a status
                # heartbeat of a bound pod) does not trigger a pass.
                self._notify("MODIFIED" if old is not None else "ADDED", old, record)
            elif not ok and old is not None:
                self._notify("DELETED", old, None)
        self._backoff.reset()


def _newer(rv: str, old: Any) -> bool:
    """Whether an object at resourceVersion ``rv`` may replace the cached record ``old``.

    resourceVersions are opaque to clients in general, but kube-apiserver's are etcd revisions
    (integers) that grow with every write: an older one must not overwrite a record this process
    stored from its own write response (:meth:`Informer.apply_local`). Non-numeric versions
    always replace.
    """
    old_rv = getattr(old, "resource_version", "") if old is not None else ""
    return not (old_rv.isdigit() and rv.isdigit() and int(old_rv) >= int(rv))


# -- sources built from the official client --------------------------------------


class WatchStream:
    """One watch connection: iterates ``{"type", "object"}`` dicts decoded from the JSON lines.

    ``close()`` releases the HTTP connection (it may be called from another thread to
    interrupt a blocked read at shutdown).
    """

    def __init__(self, response: Any) -> None:
        self._resp = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from kubernetes.watch.watch import iter_resp_lines

        for line in iter_resp_lines(self._resp):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"undecodable watch line: {line[:200]!r}") from exc
            if not isinstance(event, dict):
                raise ValueError(f"watch line is not an object: {line[:200]!r}")
            yield event

    def close(self) -> None:
        try:
            self._resp.close()
            self._resp.release_conn()
        except Exception:  # noqa: BLE001
            pass


def _paged_list(call: Callable[..., Any], **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
    """List all pages of ``call(**kwargs, limit=, _continue=, _preload_content=False)`` as raw dicts."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    rv = ""
    while True:
        extra: dict[str, Any] = {"limit": LIST_PAGE_SIZE}
        if token:
            extra["_continue"] = token
        resp = call(**kwargs, **extra, _preload_content=False, _request_timeout=(10, 60))
        body = json.loads(resp.data)
        items.extend(body.get("items") or [])
        meta = body.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or rv)
        token = meta.get("continue")
        if not token:
            return items, rv


def _watch_source(call: Callable[..., Any], **kwargs: Any) -> WatchFn:
    def watch(resource_version: str) -> WatchStream:
        timeout = int(WATCH_TIMEOUT_SECONDS * (0.8 + 0.4 * random.random()))
        resp = call(
            **kwargs,
            watch=True,
            resource_version=resource_version or None,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(10, READ_TIMEOUT_SECONDS),
        )
        return WatchStream(resp)

    return watch


def pod_source(core: CoreV1Api, *, label_selector: str | None = None, field_selector: str | None = None,
               namespace: str | None = None) -> tuple[ListFn, WatchFn]:
    """List/watch callables for pods (all namespaces, or ``namespace``) with the given selectors."""
    kwargs: dict[str, Any] = {}
    if label_selector:
        kwargs["label_selector"] = label_selector
    if field_selector:
        kwargs["field_selector"] = field_selector
    if namespace:
        call = core.list_namespaced_pod
        kwargs["namespace"] = namespace
    else:
        call = core.list_pod_for_all_namespaces
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def node_source(core: CoreV1Api) -> tuple[ListFn, WatchFn]:
    """List/watch callables for nodes."""
    return (lambda: _paged_list(core.list_node)), _watch_source(core.list_node)


def claim_source(core: CoreV1Api, namespace: str | None = None) -> tuple[ListFn, WatchFn]:
    """List/watch callables for PersistentVolumeClaims (all namespaces, or ``namespace``)."""
    if namespace:
        call = core.list_namespaced_persistent_volume_claim
        kwargs: dict[str, Any] = {"namespace": namespace}
    else:
        call, kwargs = core.list_persistent_volume_claim_for_all_namespaces, {}
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def volume_source(core: CoreV1Api) -> tuple[ListFn, WatchFn]:
    """List/watch callables for PersistentVolumes."""
    return (lambda: _paged_list(core.list_persistent_volume)), _watch_source(core.list_persistent_volume)


def budget_source(policy: Any, namespace: str | None = None) -> tuple[ListFn, WatchFn]:
    """List/watch callables for PodDisruptionBudgets (``policy``: ``PolicyV1Api``; all namespaces, or ``namespace``)."""
    if namespace:
        call, kwargs = policy.list_namespaced_pod_disruption_budget, {"namespace": namespace}
    else:
        call, kwargs = policy.list_pod_disruption_budget_for_all_namespaces, {}
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def resource_quota_source(core: CoreV1Api, namespace: str | None = None) -> tuple[ListFn, WatchFn]:
    """List/watch callables for ResourceQuotas (all namespaces, or ``namespace``)."""
    if namespace:
        call, kwargs = core.list_namespaced_resource_quota, {"namespace": namespace}
    else:
        call, kwargs = core.list_resource_quota_for_all_namespaces, {}
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def lease_source(coordination: Any, namespace: str, name: str) -> tuple[ListFn, WatchFn]:
    """List/watch callables for the one Lease ``namespace/name`` (``coordination``:
    ``CoordinationV1Api``; field selector ``metadata.name``, so RBAC ``resourceNames`` can limit it)."""
    call = coordination.list_namespaced_lease
    kwargs: dict[str, Any] = {"namespace": namespace, "field_selector": f"metadata.name={name}"}
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def admission_source(list_call: Callable[..., Any]) -> tuple[ListFn, WatchFn]:
    """List/watch callables for a cluster-scoped admissionregistration resource, given its
    ``AdmissionregistrationV1Api.list_*`` method."""
    return (lambda: _paged_list(list_call)), _watch_source(list_call)


def podgroup_source(custom: CustomObjectsApi, group: str, version: str, plural: str,
                    namespace: str | None = None, label_selector: str | None = None) -> tuple[ListFn, WatchFn]:
    """List/watch callables for a custom resource (PodGroups; ProvisioningRequests with
    ``label_selector``), all namespaces or ``namespace``."""
    if namespace:
        call = custom.list_namespaced_custom_object
        kwargs: dict[str, Any] = {"group": group, "version": version, "namespace": namespace, "plural": plural}
    else:
        call = custom.list_cluster_custom_object
        kwargs = {"group": group, "version": version, "plural": plural}
    if label_selector:
        kwargs["label_selector"] = label_selector
    return (lambda: _paged_list(call, **kwargs)), _watch_source(call, **kwargs)


def uid_key(raw: dict[str, Any]) -> str:
    uid = (raw.get("metadata") or {}).get("uid")
    if not uid:
        raise KeyError("metadata.uid missing")
    return str(uid)


def name_key(raw: dict[str, Any]) -> str:
    name = (raw.get("metadata") or {}).get("name")
    if not name:
        raise KeyError("metadata.name missing")
    return str(name)


def namespaced_key(raw: dict[str, Any]) -> tuple[str, str]:
    meta = raw.get("metadata") or {}
    if not meta.get("name"):
        raise KeyError("metadata.name missing")
    return (str(meta.get("namespace") or ""), str(meta["name"]))


def wait_all_synced(informers: Iterable[Informer], stop: threading.Event, poll: float = 0.1) -> bool:
    """Block until every informer has synced (True) or ``stop`` is set (False)."""
    informers = list(informers)
    while not stop.is_set():
        if all(i.has_synced for i in informers):
            return True
        stop.wait(poll)
    return False


@dataclass
class Caches:
    """The informers a reconcile pass reads: PodGroups (``inputs.GroupObject`` by (namespace, name)),
    labelled members and bound pods (``records.PodInfo`` by uid), nodes (``records.NodeInfo`` by name)."""

    podgroups: Informer
    members: Informer
    bound: Informer
    nodes: Informer
    #: PersistentVolumeClaims (ClaimInfo by (namespace, name)) and PersistentVolumes (VolumeInfo by
    #: name); optional: without them members' claims stay unchecked.
    claims: Informer | None = None
    volumes: Informer | None = None
    #: ResourceQuotas (records: quota.QuotaInfo), to say when a quota refuses missing members.
    quotas: Informer | None = None
    #: Unbound pods (records: ``records.nominated_pod_info``: a PodInfo while kube-scheduler has
    #: nominated a node for the pod, else None): room promised on the nominated node.
    nominated: Informer | None = None
    #: PodDisruptionBudgets (records: ``preemption.Budget`` by (namespace, name)), read by
    #: ``--preemption``'s victim selection (fewest budget violations first); None without it.
    budgets: Informer | None = None
    #: The ProvisioningRequests cogate made (records: ``provreq.RequestInfo`` by (namespace, name);
    #: label ``cogate.dev/podgroup``), for ``--provisioning-class``; None without it.
    provreqs: Informer | None = None
    #: Admission webhook configurations and policies (records: the names of those intercepting pod
    #: UPDATEs, :mod:`cogate.controller.release.refusers`), for ``validate_releases="auto"``; not part of
    #: readiness. ``admission_known``: they cover every such kind the API server serves.
    admission: tuple[Informer, ...] = ()
    admission_known: bool = False
    #: kube-scheduler's leader Lease (records: ``inflight.SchedulerLease``), with ``--preemption``:
    #: a new leader is told the nominations again (``Preempting.on_scheduler_lease``). Not part of
    #: readiness (RBAC may not allow it; cogate works without it).
    scheduler_lease: Informer | None = None
    #: DRA (``resource.k8s.io/v1``, :mod:`cogate.controller.devices.room`): ResourceSlices (records:
    #: tuples of ``devices.Device`` by name), DeviceClasses (``devices.DeviceClassInfo`` by name),
    #: ResourceClaims (``devices.DeviceClaimInfo`` by (namespace, name)), ResourceClaimTemplates
    #: ((namespace, name, ``devices.ClaimSpec``) by (namespace, name)); all four or none (an API
    #: server that does not serve the group: members' resource claims stay unchecked).
    resource_slices: Informer | None = None
    device_classes: Informer | None = None
    resource_claims: Informer | None = None
    claim_templates: Informer | None = None
    #: Kueue ``Topology`` objects (records: their levels, ``constraints.kueue_topology_levels``, by
    #: name), when the API server serves them and cogate may list them (controller/topologies.py).
    kueue_topologies: Informer | None = None

    def all(self) -> list[Informer]:
        return [i for i in (self.podgroups, self.members, self.bound, self.nodes, self.claims, self.volumes,
                            self.quotas, self.nominated, self.budgets, self.provreqs, self.resource_slices,
                            self.device_classes, self.resource_claims, self.claim_templates, self.kueue_topologies)
                if i is not None]
