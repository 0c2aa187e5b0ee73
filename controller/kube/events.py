"""Kubernetes Events on PodGroups: change detection (pure) and a best-effort recorder.

Two layers of de-duplication, as users expect from ``kubectl describe``:

1. :class:`EventDeduplicator` (pure, injected clock) decides whether an event is *news*:
   per ``(object uid, slot)`` it remembers the last reason, situation key and message
   emitted. A new reason is emitted at once. With a situation ``key``: another situation
   of the same reason is emitted at once too (it is news; keys leave out counts, so they
   change rarely), the same situation with a different message (e.g. "fits 3 of 4" ->
   "fits 2 of 4": only counts changed) at most once per ``refresh_interval`` seconds, so
   the Event's message is brought up to date at a bounded rate. Without a ``key``, a
   different message of the same reason is emitted at most once per ``min_interval``
   seconds. The same reason and message never again. ``slot`` separates independent
   streams on one object (the verdict, the timeout, one per invalid member, priorities).
2. :class:`EventRecorder` writes ``core/v1`` Events, aggregating repeats the way
   client-go's EventCorrelator does: an event with the same involved object, type,
   reason and message as one written in the last ``series_window`` seconds bumps that
   Event's ``count`` and ``lastTimestamp`` instead of creating a new object.

Writes happen on a background thread with a bounded queue: events are best effort,
never block a reconcile pass and never raise (failures are logged). :class:`Emitter` joins the
two for the controller's parts (the reconciler and its rooms), which are handed one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Collection, Hashable
from typing import Any

from cogate import api
from cogate.controller.status import notices
from cogate.controller.status.notices import ObjectRef
from cogate.kube import api_status

log = logging.getLogger(__name__)


class EventDeduplicator:
    """Decides whether an event is news (see module doc). Thread-safe: the reconcile thread,
    its status workers and informer callbacks (invalid objects) share one instance."""

    def __init__(self, min_interval: float = 60.0, refresh_interval: float = 600.0) -> None:
        self.min_interval = min_interval
        self.refresh_interval = refresh_interval
        self._last: dict[tuple[Hashable, Hashable], tuple[str, str, str, float]] = {}
        self._lock = threading.Lock()

    def should_emit(self, obj: Hashable, slot: Hashable, reason: str, message: str, now: float,
                    key: str | None = None) -> bool:
        """True if ``reason``/``message`` is news for ``(obj, slot)`` at ``now`` (epoch seconds); records it.

        ``key``: the situation the message describes, stable when only counts change
        (:func:`cogate.controller.status.notices.situation_key`); ``None`` = the message itself.
        """
        situation = message if key is None else key
        with self._lock:
            last = self._last.get((obj, slot))
            if last is not None:
                last_reason, last_situation, last_message, at = last
                if last_reason == reason:
                    if last_message == message:
                        return False
                    if last_situation == situation:
                        wait = self.refresh_interval
                    else:
                        wait = 0.0 if key is not None else self.min_interval
                    if now - at < wait:
                        return False
            self._last[(obj, slot)] = (reason, situation, message, now)
            return True

    def clear(self, obj: Hashable, slot: Hashable) -> None:
        """Forget ``(obj, slot)`` so the next event there is news (e.g. the condition ended)."""
        with self._lock:
            self._last.pop((obj, slot), None)

    def forget(self, obj: Hashable) -> None:
        """Forget every slot of ``obj`` (the object was deleted)."""
        with self._lock:
            for key in [k for k in self._last if k[0] == obj]:
                del self._last[key]

    def objects(self) -> set[Hashable]:
        with self._lock:
            return {k[0] for k in self._last}


class Emitter:
    """The one way the controller's parts emit Events: :meth:`emit` on an object only when it is
    news (:class:`EventDeduplicator`) or always, :meth:`record` always. Without a ``recorder``
    nothing is emitted (and nothing remembered). Thread-safe, as the deduplicator."""

    def __init__(self, recorder: EventRecorder | None, dedup: EventDeduplicator | None = None) -> None:
        self.recorder = recorder
        self.dedup = dedup or EventDeduplicator()

    def emit(self, ref: ObjectRef, slot: Hashable, notice: notices.Notice, now: float, key: str | None = None,
             obj: Hashable | None = None) -> None:
        """Record ``notice`` on ``ref``; with a ``slot`` only when it is news for ``(obj, slot)``
        at ``now`` (epoch seconds; ``obj`` defaults to ``ref.uid``; ``key``: the situation,
        :func:`cogate.controller.status.notices.situation_key`), without (``''``) always."""
        if self.recorder is None:
            return
        if not slot or self.dedup.should_emit(ref.uid if obj is None else obj, slot, notice.reason, notice.message,
                                              now, key):
            self.record(ref, notice)

    def record(self, ref: ObjectRef, notice: notices.Notice) -> None:
        """Record ``notice`` on ``ref`` (no de-duplication)."""
        if self.recorder is not None:
            self.recorder.record(ref, notice.type, notice.reason, notice.message)

    def clear(self, obj: Hashable, slot: Hashable) -> None:
        """The situation of ``(obj, slot)`` ended: its next event is news."""
        self.dedup.clear(obj, slot)

    def forget(self, live: Collection[Hashable]) -> None:
        """Forget every object not in ``live`` (deleted since)."""
        for obj in self.dedup.objects() - set(live):
            self.dedup.forget(obj)


def event_body(ref: ObjectRef, type_: str, reason: str, message: str, now: float, *,
               name: str, host: str = "") -> dict[str, Any]:
    """A ``core/v1`` Event (API JSON) about ``ref`` with ``count`` 1 at ``now`` (epoch seconds).

    ``message`` is cut to 1024 characters (the apiserver rejects longer event notes).
    """
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ref.namespace or "default"},
        "involvedObject": ref.to_api(),
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "source": {"component": api.COMPONENT + "-controller", **({"host": host} if host else {})},
        "reportingComponent": api.COMPONENT + "-controller",
        "reportingInstance": host or api.COMPONENT + "-controller",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventRecorder:
    """Writes Events through ``create(namespace, body) -> dict`` and ``patch(namespace, name, body)``.

    ``create``/``patch`` are injectable (tests, or :meth:`for_core_api` for the real
    ``CoreV1Api``). :meth:`record` only enqueues; :meth:`start` runs the writer thread.
    Without a started thread, :meth:`flush` writes the queue synchronously (tests).
    """

    def __init__(self, create: Callable[[str, dict[str, Any]], Any], patch: Callable[[str, str, dict[str, Any]], Any],
                 *, host: str = "", series_window: float = 3600.0, clock: Callable[[], float] = time.time,
                 max_queue: int = 10000, on_emit: Callable[[str, str], None] | None = None) -> None:
        self._create = create
        self._patch = patch
        self._host = host
        self._series_window = series_window
        self._clock = clock
        self._queue: queue.Queue[tuple[ObjectRef, str, str, str, float] | None] = queue.Queue(max_queue)
        self._series: dict[tuple[str, str, str, str, str, str], tuple[str, int, float]] = {}
        self._on_emit = on_emit
        self._thread: threading.Thread | None = None

    @classmethod
    def for_core_api(cls, core: Any, **kwargs: Any) -> "EventRecorder":
        def create(namespace: str, body: dict[str, Any]) -> Any:
            from kubernetes import client

            return core.create_namespaced_event(namespace, client.CoreV1Event.from_dict(body), _request_timeout=10)

        def patch(namespace: str, name: str, body: dict[str, Any]) -> Any:
            return core.patch_namespaced_event(name, namespace, body, _content_type="application/merge-patch+json",
                                               _preload_content=False, _request_timeout=10)

        return cls(create, patch, **kwargs)

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue an event (dropped with a log line if the queue is full). Never raises."""
        try:
            self._queue.put_nowait((ref, type_, reason, message, self._clock()))
        except queue.Full:
            log.warning("event queue full; dropped %s %s on %s/%s", type_, reason, ref.namespace, ref.name,
                        extra=ref.log_extra())
        if self._on_emit:
            self._on_emit(type_, reason)

    def start(self, stop: threading.Event) -> None:
        def run() -> None:
            while not stop.is_set():
                try:
                    item = self._queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item is not None:
                    self._write(*item)

        self._thread = threading.Thread(target=run, name="event-recorder", daemon=True)
        self._thread.start()

    def flush(self) -> None:
        """Write every queued event now, in this thread."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._write(*item)

    def _write(self, ref: ObjectRef, type_: str, reason: str, message: str, now: float) -> None:
        key = (ref.namespace, ref.name, ref.uid, type_, reason, message)
        series = self._series.get(key)
        try:
            if series is not None and now - series[2] < self._series_window:
                name, count, _ = series
                count += 1
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
                self._patch(ref.namespace or "default", name, {"count": count, "lastTimestamp": stamp})
                self._series[key] = (name, count, series[2])
                return
            name = f"{ref.name}.{uuid.uuid4().hex[:16]}"
            self._create(ref.namespace or "default", event_body(ref, type_, reason, message, now, name=name, host=self._host))
            self._series[key] = (name, 1, now)
            if len(self._series) > 10000:
                cutoff = now - self._series_window
                self._series = {k: v for k, v in self._series.items() if v[2] >= cutoff}
        except Exception as exc:  # noqa: BLE001 - events are best effort
            if api_status(exc) == 404 and series is not None:
                # The Event expired (TTL) before this repeat: start a new series with this one.
                self._series.pop(key, None)
                self._write(ref, type_, reason, message, now)
                return
            log.warning("could not write event %s on %s/%s: %s", reason, ref.namespace, ref.name, exc,
                        extra=ref.log_extra())
