"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go leaderelection's rules).

Only the leader reconciles; every replica runs informers and serves ``/readyz``.

Timing (client-go defaults used by kube-controller-manager): lease duration 15 s,
renew deadline 10 s, retry period 2 s.

- :func:`lease_decision` (pure): given the Lease record as read, ``now`` and our
  identity -> ``ACQUIRE`` (free, expired, or released lease), ``RENEW`` (we hold it) or
  ``WAIT`` (someone else holds an unexpired lease). Expiry is ``renewTime +
  leaseDurationSeconds`` on this process's clock, as client-go (which measures it from
  when it last *observed* a change; we use the renewTime itself, plus a skew margin).
- :class:`LeaderElector` (shell): tries every ``retry`` seconds; writes are optimistic
  (``replace`` with the read ``resourceVersion``; a 409 means someone else won the race).
  If renewals keep failing for ``renew_deadline`` seconds the leadership is **lost**:
  ``on_lost`` is called and the elector stops. ``cogate controller`` then exits with
  status 1 so Kubernetes restarts the pod as a follower — a process that lost the lease
  must not keep patching pods while a new leader decides (in-flight writes are cut
  short by the exit, caches are rebuilt by the restart). On clean shutdown the lease
  is released (holder cleared, duration 1 s) so a standby takes over at once.
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

LEASE_NAME = "cogate-controller"
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
#: Tolerated clock skew between replicas when judging another holder's lease (seconds).
CLOCK_SKEW = 1.0

ACQUIRE = "acquire"
RENEW = "renew"
WAIT = "wait"


@dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease's spec the election reads. Times: epoch seconds (None = unset)."""

    holder: str = ""
    lease_duration: float = LEASE_DURATION
    acquire_time: float | None = None
    renew_time: float | None = None
    transitions: int = 0


def lease_decision(record: LeaseRecord | None, now: float, identity: str, *, skew: float = CLOCK_SKEW) -> str:
    """ACQUIRE, RENEW or WAIT for ``identity`` at ``now`` (epoch seconds).

    - no Lease, no holder, or no renewTime -> ACQUIRE;
    - we are the holder -> RENEW (even if expired: nobody took it over);
    - another holder whose ``renewTime + leaseDurationSeconds + skew`` has passed -> ACQUIRE;
    - otherwise WAIT.
    """
    if not identity:
        raise ValueError("identity: must not be empty")
    if record is None or not record.holder or record.renew_time is None:
        return ACQUIRE
    if record.holder == identity:
        return RENEW
    if now >= record.renew_time + max(record.lease_duration, 0.0) + skew:
        return ACQUIRE
    return WAIT


def next_record(record: LeaseRecord | None, action: str, now: float, identity: str,
                duration: float = LEASE_DURATION) -> LeaseRecord:
    """The record to write for ``action`` (ACQUIRE bumps ``leaseTransitions`` when the holder changes)."""
    if action == RENEW and record is not None:
        return LeaseRecord(identity, duration, record.acquire_time or now, now, record.transitions)
    if action == ACQUIRE:
        transitions = (record.transitions + 1) if record is not None and record.holder not in ("", identity) else (
            record.transitions if record is not None else 0)
        return LeaseRecord(identity, duration, now, now, transitions)
    raise ValueError(f"action: nothing to write for {action!r}")


def _fmt(t: float | None) -> str | None:
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc)).timestamp()
    text = str(v).replace("Z", "+00:00")
    return _dt.datetime.fromisoformat(text).timestamp()


def record_from_lease(obj: dict[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration=float(spec.get("leaseDurationSeconds") or LEASE_DURATION),
        acquire_time=_parse(spec.get("acquireTime")),
        renew_time=_parse(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def lease_spec(r: LeaseRecord) -> dict[str, Any]:
    return {"holderIdentity": r.holder or None, "leaseDurationSeconds": int(r.lease_duration),
            "acquireTime": _fmt(r.acquire_time), "renewTime": _fmt(r.renew_time), "leaseTransitions": r.transitions}


class LeaderElector:
    """Runs the election loop on a thread. ``coordination`` is a ``CoordinationV1Api``."""

    def __init__(self, coordination: Any, namespace: str, identity: str, *, name: str = LEASE_NAME,
                 lease_duration: float = LEASE_DURATION, renew_deadline: float = RENEW_DEADLINE,
                 retry: float = RETRY_PERIOD, on_started: Callable[[], None] | None = None,
                 on_lost: Callable[[], None] | None = None, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = coordination
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry = retry
        self.on_started = on_started
        self.on_lost = on_lost
        self._clock = clock
        self._monotonic = monotonic
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        self._thread.start()
        return self._thread

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self, stop: threading.Event) -> None:
        last_renew = 0.0
        while not stop.is_set():
            ok = False
            try:
                ok = self._try_acquire_or_renew()
            except Exception as exc:  # noqa: BLE001
                log.warning("leader election: %s", exc)
            now = self._monotonic()
            if ok:
                last_renew = now
                if not self._leading.is_set():
                    log.info("leader election: %s became leader of %s/%s", self.identity, self.namespace, self.name)
                    self._leading.set()
                    if self.on_started:
                        self.on_started()
            elif self._leading.is_set() and now - last_renew >= self.renew_deadline:
                log.error("leader election: failed to renew the lease for %.0fs; leadership lost", now - last_renew)
                self._leading.clear()
                if self.on_lost:
                    self.on_lost()
                return
            stop.wait(self.retry)
        if self._leading.is_set():
            self.release()

    def _try_acquire_or_renew(self) -> bool:
        from kubernetes import client

        now = self._clock()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=5)
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "status", None) != 404:
                raise
            rec = next_record(None, ACQUIRE, now, self.identity, self.lease_duration)
            body = client.V1Lease.from_dict({"metadata": {"name": self.name, "namespace": self.namespace},
                                             "spec": lease_spec(rec)})
            try:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=5)
            except Exception as cexc:  # noqa: BLE001
                if getattr(cexc, "status", None) == 409:
                    return False
                raise
            return True
        raw = client.ApiClient().sanitize_for_serialization(lease)
        rec = record_from_lease(raw)
        action = lease_decision(rec, now, self.identity)
        if action == WAIT:
            if self._leading.is_set():
                log.error("leader election: lease taken over by %s", rec.holder)
                self._leading.clear()
                if self.on_lost:
                    self.on_lost()
            return False
        new = next_record(rec, action, now, self.identity, self.lease_duration)
        raw["spec"] = {**(raw.get("spec") or {}), **lease_spec(new)}
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, client.V1Lease.from_dict(raw),
                                              _request_timeout=5)
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "status", None) == 409:
                return False
            raise
        return True

    def release(self) -> None:
        """Give the lease up (holder cleared, 1 s duration) if we hold it. Best effort."""
        from kubernetes import client

        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=5)
            raw = client.ApiClient().sanitize_for_serialization(lease)
            if record_from_lease(raw).holder != self.identity:
                return
            now = self._clock()
            raw["spec"] = {**(raw.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1,
                           "renewTime": _fmt(now), "acquireTime": _fmt(now)}
            self.api.replace_namespaced_lease(self.name, self.namespace, client.V1Lease.from_dict(raw),
                                              _request_timeout=5)
            log.info("leader election: released the lease")
        except Exception as exc:  # noqa: BLE001
            log.warning("leader election: releasing the lease failed: %s", exc)
        finally:
            self._leading.clear()
