"""aiohttp HTTPS server of the cogate mutating webhook (the imperative shell).

Routes:

- ``POST /mutate``: body is an ``admission.k8s.io/v1`` AdmissionReview; answers the
  AdmissionReview from :func:`cogate.webhook.admission.evaluate`. A body that is not a
  valid AdmissionReview (bad JSON, wrong apiVersion/kind, missing ``request.uid``,
  ``request.object`` not an object, larger than ``max_body_bytes``) gets HTTP 400 with
  ``{"error": "<reason naming the field>"}``. An unexpected internal error never
  becomes an HTTP 500: when the request uid is known it is answered with a *denying*
  AdmissionReview (``allowed: false``, status reason ``InternalError``), so a
  labelled pod is never admitted without its gate (the same effect as the
  configuration's ``failurePolicy: Fail``); otherwise with HTTP 400.
- ``GET /healthz``: 200 while the process serves.
- ``GET /readyz``: 200 when a serving certificate is loaded (or TLS is off) and the
  server is not draining; 503 otherwise.
- ``GET /metrics``: Prometheus text format (``cogate_webhook_requests_total{outcome}``,
  ``cogate_webhook_scheduler_names_adopted_total{scheduler_name}`` (members whose adopted
  scheduler name the patch rewrote, by the name they had; a separate counter because adoption
  goes with the ``gated`` or ``already_gated`` outcome), ``cogate_webhook_request_duration_seconds``
  histogram, ``cogate_webhook_connections_total`` (connections that carried a ``/mutate``
  request: its rate against the requests' shows how often the API server opens a new TLS
  connection instead of reusing one), ``cogate_webhook_certificate_expiry_timestamp_seconds`` (the serving certificate's
  notAfter, epoch seconds; no sample without TLS), ``cogate_build_info`` and process metrics
  (:func:`cogate.metrics.register_common`); the list is docs/reference/metrics.md).

TLS: :class:`CertReloader` owns one ``ssl.SSLContext`` and re-runs
``load_cert_chain`` when the certificate or key file changes (mtime, size or inode,
as seen through symlinks, which covers Secret volume updates). Its check loop is a
background task owned by the app (:func:`reload_certificates`, aiohttp ``cleanup_ctx``):
started when the app starts, cancelled when it is cleaned up. OpenSSL copies the
certificate into each connection when the handshake object is created, so new
connections get the new certificate and established ones keep theirs. A half-written
pair (e.g. the new cert next to the old key) fails to load: the old certificate stays
in use and the next check retries.

No Kubernetes API calls are made anywhere on the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from cryptography import x509
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cogate import listen
from cogate.api import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME
from cogate.metrics import register_common

from .admission import InvalidReview, Outcome, evaluate, internal_error_response, validate_adoption

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "CERTS",
    "ADOPTED",
    "GATE_NAME",
    "METRICS",
    "STATE",
    "CertReloader",
    "CertificateExpiry",
    "ServingState",
    "WebhookServer",
    "make_app",
    "make_probe_app",
    "reload_certificates",
]

log = logging.getLogger("cogate.webhook")

#: Largest accepted AdmissionReview body, bytes. The API server limits a request
#: body to 3 MiB and etcd an object to 1.5 MiB; a CREATE review carries one object,
#: so twice the API server limit leaves room for the envelope.
DEFAULT_MAX_BODY_BYTES = 6 * 1024 * 1024

# Latency buckets, seconds: the webhook should answer in well under a millisecond
# to a few milliseconds; the API server's timeout for it is a few seconds.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class CertificateExpiry(Collector):
    """``cogate_webhook_certificate_expiry_timestamp_seconds``: ``not_after`` of the
    :class:`CertReloader` in use (:func:`reload_certificates` sets :attr:`reloader`); no sample
    without one (TLS off), so an alert on it never fires for a plain-HTTP webhook."""

    NAME = "cogate_webhook_certificate_expiry_timestamp_seconds"
    labelnames = ()

    def __init__(self) -> None:
        self.reloader: CertReloader | None = None

    def describe(self):
        return [GaugeMetricFamily(self.NAME, "notAfter of the serving certificate in use (epoch seconds); "
                                  "follows reloads.")]

    def collect(self):
        (fam,) = self.describe()
        if self.reloader is not None and self.reloader.not_after is not None:
            fam.add_metric([], self.reloader.not_after)
        return [fam]


@dataclass
class _Metrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    adopted: Counter
    certificate: CertificateExpiry
    connections: Counter
    #: transports that already carried a ``/mutate`` request (gone with their connection)
    seen: weakref.WeakSet = field(default_factory=weakref.WeakSet)


def _make_metrics(registry: CollectorRegistry | None, adopted: frozenset[str] = frozenset()) -> _Metrics:
    """Metrics in ``registry`` (a fresh one, with the build info and process metrics, when ``None``);
    ``adopted``: the adopted scheduler names, exported at zero from the start."""
    if registry is None:
        registry = CollectorRegistry()
        register_common(registry)
    requests = Counter(
        "cogate_webhook_requests",
        "Admission requests handled by the cogate webhook, by outcome "
        "(gated, already_gated, bound, empty_group, invalid_group, ignored, invalid, error).",
        ["outcome"],
        registry=registry,
    )
    for outcome in Outcome:  # export zeros so rates work from the start
        requests.labels(outcome)
    latency = Histogram(
        "cogate_webhook_request_duration_seconds",
        "Time to answer one POST /mutate, seconds (body read to response built).",
        buckets=_LATENCY_BUCKETS,
        registry=registry,
    )
    adoptions = Counter(
        "cogate_webhook_scheduler_names_adopted",
        "Members whose spec.schedulerName the webhook rewrote to default-scheduler "
        "(--adopt-scheduler-name), by the adopted name they had.",
        ["scheduler_name"],
        registry=registry,
    )
    for name in sorted(adopted):
        adoptions.labels(name)
    certificate = CertificateExpiry()
    registry.register(certificate)
    connections = Counter(
        "cogate_webhook_connections",
        "Connections (TLS when TLS is on) that carried a POST /mutate, counted at their first one; "
        "near the requests' rate when the API server opens a connection per call.",
        registry=registry,
    )
    return _Metrics(registry, requests, latency, adoptions, certificate, connections)


@contextlib.contextmanager
def _in_memory_files(*contents: bytes) -> Iterator[list[str]]:
    """Paths that read as ``contents``: Linux memfds (``/proc/self/fd/N``, nothing written to any
    file system), else files in a private temporary directory (other systems, local use)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fds = []
        try:
            for data in contents:
                fd = os.memfd_create("cogate-tls")
                fds.append(fd)
                os.write(fd, data)
            yield [f"/proc/self/fd/{fd}" for fd in fds]
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="cogate-tls-") as tmp:
        paths = []
        for i, data in enumerate(contents):
            path = os.path.join(tmp, str(i))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(path)
        yield paths


def _not_after(pem: bytes) -> float | None:
    """notAfter (epoch seconds) of the first certificate in ``pem`` (the serving one: a chain
    starts with the leaf), None when it does not parse."""
    try:
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()
    except ValueError:
        return None


class CertReloader:
    """A server ``ssl.SSLContext`` that follows certificate/key files on disk.

    ``cert_file``/``key_file``: PEM paths (the cert file may hold the chain).
    ``interval``: seconds between file checks in :meth:`run`. The first load happens
    in the constructor and raises (``OSError``/``ssl.SSLError``) if the files are
    missing or do not match; later failed reloads are logged and keep the old pair.
    """

    def __init__(self, cert_file: str, key_file: str, interval: float = 5.0) -> None:
        if interval <= 0:
            raise ValueError(f"tls reload interval: must be > 0 seconds, got {interval}")
        self.cert_file = cert_file
        self.key_file = key_file
        self.interval = interval
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.reloads = 0  #: successful reloads after the first load
        #: set after each successful reload (tests and callers may wait on it)
        self.reloaded = asyncio.Event()
        self._stamp = self._file_stamp()
        self.context.load_cert_chain(cert_file, key_file)
        with open(cert_file, "rb") as f:
            #: notAfter of the certificate loaded (epoch seconds; None when it does not parse)
            self.not_after: float | None = _not_after(f.read())

    def _file_stamp(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)  # follows symlinks: Secret volumes swap a ..data link
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def check(self) -> bool:
        """Reload the pair if either file changed since the last successful load.

        Returns True when a new certificate was loaded. Never raises: an unreadable
        or mismatched pair is logged at warning and retried at the next check.
        """
        try:
            stamp = self._file_stamp()
        except OSError as exc:
            log.warning("tls reload: cannot stat certificate files: %s", exc, extra={"event": "tls_reload_failed"})
            return False
        if stamp == self._stamp:
            return False
        try:
            self._load_validated()
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning(
                "tls reload: keeping the previous certificate, new pair does not load: %s",
                exc,
                extra={"event": "tls_reload_failed", "cert_file": self.cert_file},
            )
            return False
        self._stamp = stamp
        self.reloads += 1
        self.reloaded.set()
        log.info("tls certificate reloaded", extra={"event": "tls_reloaded", "cert_file": self.cert_file})
        return True

    def _load_validated(self) -> None:
        """Load the current files into the live context only if they form a valid pair.

        A failed ``load_cert_chain`` can leave a context with a certificate and a
        mismatched key, which breaks every new handshake. So the files are read once,
        the bytes are loaded into a scratch context, and only when that works into the live
        one (the same bytes: no race with a writer changing the files in between).
        ``load_cert_chain`` only takes paths: the bytes go to anonymous in-memory files
        (:func:`_in_memory_files`), never to disk -- the container's root file system is
        read-only and ``/certs`` may be mounted read-only.
        """
        with open(self.cert_file, "rb") as f:
            cert = f.read()
        with open(self.key_file, "rb") as f:
            key = f.read()
        with _in_memory_files(cert, key) as (cert_copy, key_copy):
            scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            scratch.load_cert_chain(cert_copy, key_copy)
            self.context.load_cert_chain(cert_copy, key_copy)
        self.not_after = _not_after(cert)

    async def run(self) -> None:
        """Check the files every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.check()


@dataclass(slots=True)
class ServingState:
    """What ``/readyz`` reports: 503 while ``draining``. (Not ready without a certificate
    needs no flag: the server does not start until :class:`CertReloader` has loaded one.)"""

    draining: bool = False


#: aiohttp application keys (typed state on the app).
GATE_NAME = web.AppKey("gate_name", str)
SCHEDULER_NAMES = web.AppKey("scheduler_names", frozenset)
ADOPTED = web.AppKey("adopted_scheduler_names", frozenset)
METRICS = web.AppKey("metrics", _Metrics)
STATE = web.AppKey("state", ServingState)
CERTS = web.AppKey("certs", CertReloader)


def reload_certificates(app: web.Application, reloader: CertReloader) -> None:
    """Make ``app`` own ``reloader``'s check loop (:meth:`CertReloader.run`): a background task
    started when the app starts up and cancelled when it is cleaned up (aiohttp ``cleanup_ctx``,
    the "Background tasks" pattern). Call before the app starts."""
    app[CERTS] = reloader
    app[METRICS].certificate.reloader = reloader
    app.cleanup_ctx.append(_certificate_reload_task)


async def _certificate_reload_task(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(app[CERTS].run(), name="cogate-webhook-tls-reload")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _json_response(body: Any, status: int = 200) -> web.Response:
    """``body`` encoded with orjson (a fifth of the stdlib's time for a review's answer)."""
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json_response({"error": message}, status=status)


def _request_uid(review: Any) -> str | None:
    """``request.uid`` of a review when it is a non-empty string, else None."""
    if isinstance(review, dict):
        request = review.get("request")
        if isinstance(request, dict):
            uid = request.get("uid")
            if isinstance(uid, str) and uid:
                return uid
    return None


async def _mutate(request: web.Request) -> web.Response:
    app = request.app
    metrics = app[METRICS]
    started = time.perf_counter()
    outcome = Outcome.ERROR
    transport = request.transport
    if transport is not None and transport not in metrics.seen:  # the connection's first /mutate
        metrics.seen.add(transport)
        metrics.connections.inc()
    try:
        response, outcome, adopted = await _mutate_inner(request, app[GATE_NAME], app[SCHEDULER_NAMES],
                                                         app[ADOPTED])
        if adopted:
            metrics.adopted.labels(adopted).inc()
        return response
    except Exception as exc:  # last resort (e.g. a logging bug): never an HTTP 500
        log.exception("admission request failed", extra={"event": "admission_error"})
        return _error(400, f"cannot process request: {type(exc).__name__}")
    finally:
        metrics.requests.labels(outcome).inc()
        metrics.latency.observe(time.perf_counter() - started)


async def _mutate_inner(request: web.Request, gate_name: str, scheduler_names: frozenset[str],
                        adopted: frozenset[str]) -> tuple[web.Response, Outcome, str]:
    """The response to one ``/mutate`` request, its outcome and the adopted scheduler name the
    patch rewrote ("" for none)."""
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        msg = f"body: larger than {request.client_max_size} bytes"
        log.warning("invalid admission request: %s", msg, extra={"event": "invalid_review", "reason": msg})
        return _error(400, msg), Outcome.INVALID, ""
    try:
        # orjson: decoding the ~5 KB review with the stdlib json was a fifth of the webhook's CPU
        # time per review (docs/benchmarks.md, Webhook); orjson takes half of that.
        review = orjson.loads(body)
    except (ValueError, RecursionError) as exc:  # orjson.JSONDecodeError is a ValueError
        msg = f"body: not valid JSON: {exc}"[:300]
        log.warning("invalid admission request: %s", msg, extra={"event": "invalid_review", "reason": msg})
        return _error(400, msg), Outcome.INVALID, ""
    started = time.perf_counter()
    try:
        decision = evaluate(review, gate_name, scheduler_names, adopted)
    except InvalidReview as exc:
        log.warning(
            "invalid admission request: %s",
            exc,
            extra={"event": "invalid_review", "reason": str(exc), "uid": _request_uid(review)},
        )
        return _error(400, str(exc)), Outcome.INVALID, ""
    except Exception as exc:  # a bug: never a 500, never admit a pod unchecked
        uid = _request_uid(review)
        log.exception("admission failed", extra={"event": "admission_error", "uid": uid})
        if uid is None:
            return _error(400, f"cannot process request: {type(exc).__name__}"), Outcome.ERROR, ""
        denial = internal_error_response(uid, type(exc).__name__)
        return _json_response(denial), Outcome.ERROR, ""
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "admission %s %s/%s: %s",
            decision.operation,
            decision.namespace,
            decision.name,
            decision.outcome,
            extra={
                "event": "admission",
                "uid": decision.uid,
                "operation": decision.operation,
                "kind": decision.kind,
                "namespace": decision.namespace,
                "object_name": decision.name,
                "outcome": decision.outcome,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                **decision.extra,
            },
        )
    return _json_response(decision.response()), decision.outcome, decision.adopted


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.draining:
        return web.Response(status=503, text="draining\n")
    return web.Response(text="ok\n")


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def make_app(
    gate_name: str = DEFAULT_GATE_NAME,
    *,
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME}),
    adopted: frozenset[str] = frozenset(),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    registry: CollectorRegistry | None = None,
) -> web.Application:
    """The webhook aiohttp application (no TLS here: see :class:`WebhookServer`).

    ``gate_name``: scheduling gate to add; ``scheduler_names``: the schedulers the controller
    plans for (a member naming another gets a warning); ``adopted``: scheduler names rewritten
    to ``default-scheduler`` in gated members (``--adopt-scheduler-name``; raises ``ValueError``
    when one is ``default-scheduler`` or in ``scheduler_names``:
    :func:`cogate.webhook.admission.validate_adoption`); ``max_body_bytes``: largest accepted
    ``/mutate`` body (bytes, larger gets 400); ``registry``: Prometheus registry for
    the webhook metrics (a fresh one with process metrics when ``None``, so several
    apps can live in one process). ``app[STATE].draining = True`` makes ``/readyz``
    answer 503.
    """
    app = web.Application(client_max_size=max_body_bytes)
    app[GATE_NAME] = gate_name
    app[SCHEDULER_NAMES] = frozenset(scheduler_names)
    app[ADOPTED] = validate_adoption(adopted, app[SCHEDULER_NAMES])
    app[METRICS] = _make_metrics(registry, app[ADOPTED])
    app[STATE] = ServingState()
    app.router.add_post("/mutate", _mutate)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


def make_probe_app(app: web.Application) -> web.Application:
    """Plain-HTTP app with ``/metrics``, ``/healthz`` and ``/readyz`` of ``app``.

    Shares ``app``'s metrics and state (so draining shows on both); has no
    ``/mutate``. Used for ``--metrics-port``.
    """
    probe = web.Application()
    probe[METRICS] = app[METRICS]
    probe[STATE] = app[STATE]
    probe.router.add_get("/healthz", _healthz)
    probe.router.add_get("/readyz", _readyz)
    probe.router.add_get("/metrics", _metrics)
    return probe


async def _close_while_draining(request: web.Request, response: web.StreamResponse) -> None:
    """While draining, every response closes its connection (``Connection: close``): a client
    that pooled a connection to this replica opens its next one through the Service."""
    if request.app[STATE].draining:
        response.force_close()  # the connection closes after this response...
        response.headers["Connection"] = "close"  # ...and the client is told (headers are not sent yet)


class WebhookServer:
    """The webhook app bound to a host/port, over TLS unless ``tls`` is ``None``; ``host``
    :data:`cogate.listen.ANY` (default): every address of both IP families.

    With ``tls``, the app owns its certificate reload loop (:func:`reload_certificates`).
    ``start()`` binds (``port=0`` picks a free port; see :attr:`port`); with ``metrics_port``
    set, also serves :func:`make_probe_app` over plain HTTP on that port. ``stop()`` drains:
    ``/readyz`` turns 503 and, for ``shutdown_delay`` seconds, requests are still served (each
    response closing its connection, so clients reconnect elsewhere) while the pod leaves the
    Service's endpoints (EndpointSlice, then kube-proxy's rules: seconds, during which the API
    server still sends new connections here); then the listener closes, in-flight requests get
    up to ``shutdown_timeout`` seconds to finish, and the app's cleanup ends the reload loop.
    """

    def __init__(
        self,
        app: web.Application,
        host: str = listen.ANY,
        port: int = 9443,
        tls: CertReloader | None = None,
        shutdown_timeout: float = 10.0,
        metrics_port: int | None = None,
        shutdown_delay: float = 0.0,
    ) -> None:
        self.app = app
        self.shutdown_delay = shutdown_delay
        app.on_response_prepare.append(_close_while_draining)
        self.host = host
        self.requested_port = port
        self.tls = tls
        if tls is not None:
            reload_certificates(app, tls)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)
        self.metrics_port = metrics_port
        self.probe_runner = (
            web.AppRunner(make_probe_app(app), access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)
            if metrics_port is not None
            else None
        )

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return int(self.runner.addresses[0][1])

    @property
    def probe_port(self) -> int | None:
        """The bound plain-HTTP probe/metrics port, or None without ``metrics_port``."""
        if self.probe_runner is None:
            return None
        return int(self.probe_runner.addresses[0][1])

    async def start(self) -> None:
        await self.runner.setup()
        # one socket per port, both IP families by default (cogate.listen)
        site = web.SockSite(
            self.runner,
            listen.listening_socket(self.host, self.requested_port),
            ssl_context=self.tls.context if self.tls else None,
        )
        await site.start()
        if self.probe_runner is not None:
            await self.probe_runner.setup()
            await web.SockSite(self.probe_runner, listen.listening_socket(self.host, self.metrics_port or 0)).start()
        log.info(
            "webhook listening",
            extra={"event": "listening", "host": self.host, "port": self.port, "tls": self.tls is not None},
        )

    async def drain(self) -> None:
        """Wait out the drain: ``shutdown_delay`` seconds (tests replace it to end the drain when
        they have seen what happens during it, instead of racing a wall-clock window)."""
        await asyncio.sleep(self.shutdown_delay)

    async def stop(self) -> None:
        self.app[STATE].draining = True
        if self.shutdown_delay > 0:
            log.info("draining: still serving for %ss while the pod leaves the Service's endpoints",
                     self.shutdown_delay, extra={"event": "shutdown_delay", "seconds": self.shutdown_delay})
            await self.drain()
        await self.runner.cleanup()
        if self.probe_runner is not None:
            await self.probe_runner.cleanup()
        log.info("webhook stopped", extra={"event": "stopped"})
