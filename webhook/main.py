"""``cogate webhook``: run the mutating admission webhook.

Usage::

    cogate webhook --tls-cert-file /tls/tls.crt --tls-key-file /tls/tls.key \\
        [--host 0.0.0.0] [--port 9443] [--gate-name scheduling.x-k8s.io/pod-group] \\
        [--scheduler-name NAME ...] [--adopt-scheduler-name scheduler-plugins-scheduler ...] \\
        [--tls-reload-interval 5] [--metrics-port 8080] [--log-level info] [--log-format text]

    cogate webhook --insecure-http --port 8443   # local debugging only

``--insecure-http`` serves plain HTTP; the Kubernetes API server only calls webhooks
over HTTPS, so this is for local debugging (curl, tests), never for a cluster.

Logs go to stderr as text or JSON lines (``--log-format``, :mod:`cogate.logs`): one line per
admission request at ``debug``, invalid requests and failed certificate reloads at ``warning``,
internal errors at ``error``; each carries an ``event`` field (``listening``, ``admission``, ...).
SIGTERM or SIGINT drains: ``/readyz`` turns 503, requests are still served for
``--shutdown-delay`` seconds (each response closing its connection) while the pod leaves the
Service's endpoints, then the listener closes, in-flight requests get ``--shutdown-timeout``
seconds to finish, and the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import ssl
import sys
import time

from cogate import cliargs, listen, logs
from cogate.api import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME
from cogate.logs import JsonFormatter

from .admission import validate_adoption

__all__ = ["JsonFormatter", "build_parser", "main"]

log = logging.getLogger("cogate.webhook")

def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``cogate webhook``."""
    p = argparse.ArgumentParser(
        prog="cogate webhook",
        description="Run the mutating admission webhook: it adds the scheduling gate to every new pod labelled "
                    "scheduling.x-k8s.io/pod-group, so the pod waits until the controller releases its PodGroup.",
    )
    p.add_argument("--host", metavar="ADDRESS", default=listen.ANY,
                   help=listen.host_help("the HTTPS and metrics ports"))
    p.add_argument("--port", metavar="PORT", type=cliargs.port, default=9443,
                   help="HTTPS port for /mutate and probes (default: %(default)s)")
    p.add_argument("--tls-cert-file", metavar="PATH",
                   help="PEM serving certificate (chain); required unless --insecure-http")
    p.add_argument("--tls-key-file", metavar="PATH",
                   help="PEM private key of the certificate; required unless --insecure-http")
    p.add_argument(
        "--tls-reload-interval",
        type=cliargs.positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how often to check the certificate files for changes and reload them (default: %(default)s)",
    )
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP without TLS, for LOCAL DEBUGGING ONLY: the API server calls webhooks over "
        "HTTPS (default: off)",
    )
    p.add_argument(
        "--gate-name",
        metavar="NAME",
        type=cliargs.gate_name,
        default=DEFAULT_GATE_NAME,
        help="scheduling gate to add; must match the controller's --gate-name (default: %(default)s)",
    )
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        action="append",
        default=[],
        dest="scheduler_names",
        help=f"a scheduler the controller also plans for (repeatable; pass the controller's --scheduler-name "
        f"values): a labelled pod naming a scheduler other than these and {DEFAULT_SCHEDULER_NAME!r} is gated "
        "with a warning that its PodGroup stays gated (default: none)",
    )
    p.add_argument(
        "--adopt-scheduler-name",
        metavar="NAME",
        action="append",
        default=[],
        dest="adopt_scheduler_names",
        help=f"a scheduler name to adopt (repeatable; the chart passes scheduler-plugins-scheduler): a pod the "
        f"webhook gates that names it gets spec.schedulerName {DEFAULT_SCHEDULER_NAME!r} in the same patch, with "
        f"an admission warning; must not be {DEFAULT_SCHEDULER_NAME!r} nor a --scheduler-name (default: none)",
    )
    p.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=cliargs.port,
        default=None,
        help="also serve /metrics, /healthz, /readyz over plain HTTP on this port (default: only on --port)",
    )
    p.add_argument(
        "--shutdown-delay",
        type=cliargs.non_negative_seconds,
        default=0.0,
        metavar="SECONDS",
        help="on SIGTERM, keep serving this long (readiness failing, connections closed after each response) "
        "before closing the listener, so that the pod leaves the Service's endpoints first; the chart sets 5 "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=cliargs.positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight requests may take to finish (default: %(default)s)",
    )
    cliargs.add_log_flags(p, "debug logs one line per admission request")
    return p


def _configure_logging(level: str, fmt: str = "text") -> None:
    logs.configure(level, fmt)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per request is ours, at debug


async def _serve(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    from .server import CertReloader, WebhookServer, make_app

    tls = None
    if not args.insecure_http:
        try:
            tls = CertReloader(args.tls_cert_file, args.tls_key_file, args.tls_reload_interval)
        except (OSError, ssl.SSLError) as exc:
            log.error("cannot load TLS certificate: %s", exc, extra={"event": "tls_load_failed"})
            return 1
    else:
        log.warning("serving plain HTTP (--insecure-http): for local debugging only", extra={"event": "insecure"})
    server = WebhookServer(
        make_app(args.gate_name, scheduler_names=_scheduler_names(args), adopted=frozenset(args.adopt_scheduler_names)),
        host=args.host,
        port=args.port,
        tls=tls,
        shutdown_timeout=args.shutdown_timeout,
        shutdown_delay=args.shutdown_delay,
        metrics_port=args.metrics_port,
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / platform
            pass
    try:
        try:
            await server.start()
        except OSError as exc:
            log.error("cannot listen on %s:%s: %s", args.host, args.port, exc, extra={"event": "listen_failed"})
            await server.stop()
            return 1
        await stop.wait()
        started = time.monotonic()
        log.info("shutting down: draining in-flight requests", extra={"event": "draining"})
        await server.stop()
        log.info("drained", extra={"event": "drained", "seconds": round(time.monotonic() - started, 3)})
        return 0
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def _scheduler_names(args: argparse.Namespace) -> frozenset[str]:
    """The scheduler names the controller plans for: ``--scheduler-name`` plus the default."""
    return frozenset({DEFAULT_SCHEDULER_NAME, *args.scheduler_names})


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cogate webhook``; returns the process exit code.

    Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT), 1 when the certificate
    cannot be loaded or the port cannot be bound, 2 on bad flags (argparse; also an
    ``--adopt-scheduler-name`` that is ``default-scheduler`` or a ``--scheduler-name``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.insecure_http and not (args.tls_cert_file and args.tls_key_file):
        parser.error("--tls-cert-file and --tls-key-file are required (or --insecure-http for local debugging)")
    try:
        validate_adoption(args.adopt_scheduler_names, _scheduler_names(args))
    except ValueError as exc:
        parser.error(str(exc))
    _configure_logging(args.log_level, args.log_format)
    return asyncio.run(_serve(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
