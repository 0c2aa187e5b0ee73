"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go leaderelection's rules).

Only the leader reconciles; every replica runs informers and serves ``/readyz``.

Timing (client-go defaults used by kube-controller-manager): lease duration 15 s,
renew deadline 10 s, retry period 2 s.

Safety argument (why two replicas never lead at once, given clocks that *run* at the
same rate; no agreement on wall-clock time is needed):

- **We lead only by time.** :meth:`LeaderElector.is_leader` is true only while
  ``monotonic() - renewed_at < renew_deadline`` (10 s), ``renewed_at`` being the local
  monotonic time at which the last *successful* acquire/renew attempt **started**
  (:func:`leading`). A renewal that hangs cannot keep a stale flag set: leadership
  lapses on its own 10 s after the last attempt that succeeded began.
- **Others wait by local observation.** A replica judges another holder's lease from
  the local monotonic time at which it last *observed the record change*
  (:func:`observe`), not from the holder's ``renewTime`` (written on another clock):
  it takes over only once the record has stayed unchanged for ``leaseDurationSeconds``
  (15 s) by its own clock (:func:`lease_decision`). Our last successful write landed
  after ``renewed_at``, so nobody can observe it before then, so nobody takes over
  before ``renewed_at + 15 s`` -- 5 s after we stopped leading.
- **Every API call has what is left of the deadline.** Each read/create/replace of an
  attempt gets ``_request_timeout`` = the time left until the attempt's deadline
  (``renewed_at + renew_deadline`` while leading, else ``start + renew_deadline``),
  so an attempt cannot outlast the leadership it is trying to extend.
- **Losing exits.** When a leader's deadline passes without a successful renewal, or
  it reads the Lease held by someone else, ``on_lost`` is called once and the elector
  stops. ``cogate controller`` passes an ``on_lost`` that logs, flushes and calls
  ``os._exit(1)``: no in-flight reconcile write continues, Kubernetes restarts the pod
  as a follower and its caches are rebuilt.

Writes are optimistic: ``replace`` sends the Lease as read (raw JSON, including
``metadata.resourceVersion``) with a new ``spec``; a 409 means someone else won the
race. On clean shutdown :meth:`LeaderElector.release` clears the holder (duration 1 s)
so a standby takes over at once (an empty holder is acquired without waiting).

Source of the rules: k8s.io/client-go/tools/leaderelection (``tryAcquireOrRenew``:
``observedTime`` / ``isLeaseValid``, renew loop bounded by ``RenewDeadline``).
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cogate.kube import api_status, json_body

if TYPE_CHECKING:
    from kubernetes.client import CoordinationV1Api

log = logging.getLogger(__name__)

LEASE_NAME = "cogate-controller"
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
#: Timeout of each call made by :meth:`LeaderElector.release` (seconds).
RELEASE_TIMEOUT = 5.0

ACQUIRE = "acquire"
RENEW = "renew"
WAIT = "wait"


@dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease's spec the election reads. Times: epoch seconds (None = unset);
    ``lease_duration`` in seconds."""

    holder: str = ""
    lease_duration: float = LEASE_DURATION
    acquire_time: float | None = None
    renew_time: float | None = None
    transitions: int = 0


@dataclass(frozen=True)
class Observation:
    """The Lease record as last read (None = no Lease) and ``observed_at``: the local
    monotonic time (seconds) at which this process first saw the record in that form
    (client-go's ``observedRecord`` / ``observedTime``)."""

    record: LeaseRecord | None
    observed_at: float


def observe(previous: Observation | None, record: LeaseRecord | None, now: float) -> Observation:
    """The observation after reading ``record`` at local monotonic time ``now`` (seconds).

    An unchanged record keeps its original ``observed_at``; any change of the record
    (holder, times, duration, transitions) restarts it at ``now``.
    """
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def lease_decision(observation: Observation, now: float, identity: str) -> str:
    """ACQUIRE, RENEW or WAIT for ``identity`` at local monotonic time ``now`` (seconds).

    - no Lease or no holder (never held, or released) -> ACQUIRE;
    - we are the holder -> RENEW (even if expired: nobody took it over);
    - another holder whose record has not changed for ``leaseDurationSeconds`` since
      this process observed it (``now >= observed_at + lease_duration``) -> ACQUIRE;
    - otherwise WAIT.

    The holder's ``renewTime`` is deliberately ignored: it was written on another
    host's clock. Raises ``ValueError`` if ``identity`` is empty.
    """
    if not identity:
        raise ValueError("identity: must not be empty")
    record = observation.record
    if record is None or not record.holder:
        return ACQUIRE
    if record.holder == identity:
        return RENEW
    if now >= observation.observed_at + max(record.lease_duration, 0.0):
        return ACQUIRE
    return WAIT


def leading(renewed_at: float | None, now: float, renew_deadline: float = RENEW_DEADLINE) -> bool:
    """Whether we lead at local monotonic time ``now``: a successful acquire/renew attempt
    started at ``renewed_at`` (None = never) less than ``renew_deadline`` seconds ago."""
    return renewed_at is not None and 0.0 <= now - renewed_at < renew_deadline


def next_record(record: LeaseRecord | None, action: str, now: float, identity: str,
                duration: float = LEASE_DURATION) -> LeaseRecord:
    """The record to write for ``action`` at epoch time ``now`` (ACQUIRE bumps
    ``leaseTransitions`` when the holder changes). Raises ``ValueError`` for WAIT."""
    if action == RENEW and record is not None:
        return LeaseRecord(identity, duration, record.acquire_time or now, now, record.transitions)
    if action == ACQUIRE:
        transitions = (record.transitions + 1) if record is not None and record.holder not in ("", identity) else (
            record.transitions if record is not None else 0)
        return LeaseRecord(identity, duration, now, now, transitions)
    raise ValueError(f"action: nothing to write for {action!r}")


def _fmt(t: float | None) -> str | None:
    """Epoch seconds -> a MicroTime string (RFC 3339, microseconds, UTC)."""
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(v: Any, field: str) -> float | None:
    if v is None or v == "":
        return None
    try:
        return _dt.datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"Lease spec.{field}: not an RFC 3339 time: {v!r}") from None


def record_from_lease(obj: Any) -> LeaseRecord:
    """The :class:`LeaseRecord` of a Lease as API JSON (a dict). Raises ``ValueError``
    naming the field when the Lease is malformed."""
    if not isinstance(obj, dict):
        raise ValueError(f"Lease: must be an object, got {type(obj).__name__}")
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise ValueError(f"Lease spec: must be an object, got {type(spec).__name__}")
    try:
        duration = float(spec.get("leaseDurationSeconds") or LEASE_DURATION)
    except (TypeError, ValueError):
        raise ValueError("Lease spec.leaseDurationSeconds: not a number: "
                         f"{spec.get('leaseDurationSeconds')!r}") from None
    try:
        transitions = int(spec.get("leaseTransitions") or 0)
    except (TypeError, ValueError):
        raise ValueError(f"Lease spec.leaseTransitions: not an integer: {spec.get('leaseTransitions')!r}") from None
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration=duration,
        acquire_time=_parse(spec.get("acquireTime"), "acquireTime"),
        renew_time=_parse(spec.get("renewTime"), "renewTime"),
        transitions=transitions,
    )


def lease_spec(r: LeaseRecord) -> dict[str, Any]:
    """A Lease ``spec`` (API JSON) for ``r``."""
    return {"holderIdentity": r.holder or None, "leaseDurationSeconds": int(r.lease_duration),
            "acquireTime": _fmt(r.acquire_time), "renewTime": _fmt(r.renew_time), "leaseTransitions": r.transitions}


class DeadlinePassed(Exception):
    """The current attempt has no time left before its deadline."""


class LeaderElector:
    """Runs the election loop on a thread. ``coordination`` is a ``CoordinationV1Api``
    (called with ``_preload_content=False``: Leases travel as raw JSON dicts).

    ``clock`` gives epoch seconds (written into ``renewTime``/``acquireTime`` only);
    every decision uses ``monotonic``. ``on_started`` is called once when we become
    leader, ``on_lost`` once when a leader's lease lapses or is taken over (the elector
    stops afterwards; see the module docstring).
    """

    def __init__(self, coordination: CoordinationV1Api, namespace: str, identity: str, *, name: str = LEASE_NAME,
                 lease_duration: float = LEASE_DURATION, renew_deadline: float = RENEW_DEADLINE,
                 retry: float = RETRY_PERIOD, on_started: Callable[[], None] | None = None,
                 on_lost: Callable[[], None] | None = None, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not identity:
            raise ValueError("identity: must not be empty")
        if not 0 < retry < renew_deadline < lease_duration:
            raise ValueError("timing: need 0 < retry < renew_deadline < lease_duration (seconds), got "
                             f"{retry}, {renew_deadline}, {lease_duration}")
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
        #: Local monotonic start of the last successful acquire/renew (None = not leading).
        self._renewed_at: float | None = None
        self._observed: Observation | None = None
        self._attempt_deadline = 0.0
        self._started = False
        self._thread: threading.Thread | None = None

    # -- state ---------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True while the last successful acquire/renew started less than ``renew_deadline`` ago."""
        return leading(self._renewed_at, self._monotonic(), self.renew_deadline)

    def _request_timeout(self) -> float:
        """Seconds left for the next API call of this attempt (its share of the renew deadline).

        Raises :class:`DeadlinePassed` when nothing is left.
        """
        left = self._attempt_deadline - self._monotonic()
        if left <= 0:
            raise DeadlinePassed("renew deadline passed before the request")
        return left

    # -- loop ------------------------------------------------------------------------
    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        self._thread.start()
        return self._thread

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self, stop: threading.Event) -> None:
        """Try every ``retry`` seconds until ``stop`` or until leadership is lost. Does not
        release the lease on ``stop`` (the caller does, once its own writes have stopped:
        :meth:`release`)."""
        while not stop.is_set():
            if not self.step():
                return
            stop.wait(self.retry)

    def step(self) -> bool:
        """One acquire/renew attempt; False once leadership was lost (``on_lost`` called)."""
        start = self._monotonic()
        self._attempt_deadline = (self._renewed_at + self.renew_deadline if self.is_leader()
                                  else start + self.renew_deadline)
        ok = False
        try:
            ok = self._try_acquire_or_renew(start)
        except Exception as exc:  # noqa: BLE001 - a failed attempt is retried until the deadline
            log.warning("leader election: %s", exc)
        if ok:
            self._renewed_at = start
            if not self._started:
                self._started = True
                log.info("leader election: %s became leader of %s/%s", self.identity, self.namespace, self.name)
                if self.on_started:
                    self.on_started()
            return True
        if not self._started:
            return True
        observed = self._observed.record if self._observed is not None else None
        if observed is not None and observed.holder not in ("", self.identity):
            self._lose(f"lease taken over by {observed.holder}")
            return False
        if not self.is_leader():
            self._lose(f"failed to renew the lease within {self.renew_deadline:.0f}s")
            return False
        return True

    def _lose(self, why: str) -> None:
        self._renewed_at = None
        self._started = False
        log.error("leader election: %s; leadership lost", why)
        if self.on_lost:
            self.on_lost()

    def _try_acquire_or_renew(self, start: float) -> bool:
        now = self._clock()
        try:
            raw = json_body(self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                       _request_timeout=self._request_timeout()))
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) != 404:
                raise
            rec = next_record(None, ACQUIRE, now, self.identity, self.lease_duration)
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": lease_spec(rec)}
            try:
                created = self.api.create_namespaced_lease(self.namespace, body, _preload_content=False,
                                                           _request_timeout=self._request_timeout())
            except Exception as cexc:  # noqa: BLE001
                if api_status(cexc) == 409:
                    return False
                raise
            self._observed = observe(self._observed, record_from_lease(json_body(created) or body), self._monotonic())
            return True
        rec = record_from_lease(raw)
        self._observed = observe(self._observed, rec, self._monotonic())
        action = lease_decision(self._observed, self._monotonic(), self.identity)
        if action == WAIT:
            return False
        new = next_record(rec, action, now, self.identity, self.lease_duration)
        raw["spec"] = {**(raw.get("spec") or {}), **lease_spec(new)}  # metadata.resourceVersion kept: optimistic
        try:
            written = self.api.replace_namespaced_lease(self.name, self.namespace, raw, _preload_content=False,
                                                        _request_timeout=self._request_timeout())
        except Exception as exc:  # noqa: BLE001
            if api_status(exc) == 409:
                return False
            raise
        self._observed = observe(self._observed, record_from_lease(json_body(written) or raw), self._monotonic())
        return True

    def release(self) -> None:
        """Give the lease up (holder cleared, 1 s duration) if we hold it. Best effort.

        Leadership ends first (:meth:`is_leader` turns False); call only once this
        process has stopped writing."""
        self._renewed_at = None
        self._started = False
        try:
            raw = json_body(self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                       _request_timeout=RELEASE_TIMEOUT))
            if record_from_lease(raw).holder != self.identity:
                return
            now = self._clock()
            raw["spec"] = {**(raw.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1,
                           "renewTime": _fmt(now), "acquireTime": _fmt(now)}
            self.api.replace_namespaced_lease(self.name, self.namespace, raw, _preload_content=False,
                                              _request_timeout=RELEASE_TIMEOUT)
            log.info("leader election: released the lease")
        except Exception as exc:  # noqa: BLE001
            log.warning("leader election: releasing the lease failed: %s", exc)
