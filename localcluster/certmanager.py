"""cert-manager's controller and CA injector as local processes beside a
:class:`~cogate.localcluster.cluster.LocalCluster`.

The chart's ``webhook.certs.mode=cert-manager`` needs cert-manager in the cluster: its controller
issues the webhook's serving ``Certificate`` into a Secret, its CA injector (cainjector) copies the
issuing CA into the MutatingWebhookConfiguration's ``caBundle`` (annotation
``cert-manager.io/inject-ca-from``). tests/e2e/test_helm_cert_manager.py runs both here, built from
the pinned module like the control plane (:data:`versions.CERT_MANAGER`, :mod:`build`), out of the
cluster with the cluster's kubeconfig, as the cert-manager chart runs them in it otherwise.

What they need out of the cluster (read from the sources at the pinned tag,
``cmd/controller/app/options/options.go``, ``cmd/cainjector/app/start.go``):

- the CRDs of ``deploy/crds`` (all six: the controller's default controller set includes the ACME
  ``orders`` and ``challenges`` controllers, whose informers never sync without their CRDs). Their
  ``metadata.labels`` are Helm template text (``'{{ template "cert-manager.name" . }}'``), which the
  API server refuses as label values: :func:`crd_manifests` drops those labels.
- **controller**: ``--kubeconfig``, ``--leader-elect=false``, ``--cluster-resource-namespace`` (where
  a ClusterIssuer's Secrets are read; created by :meth:`CertManager.start`), its Prometheus metrics
  listener (default ``0.0.0.0:9402``) moved to a free port of 127.0.0.1. Ready: ``/metrics`` answers
  (the listener opens before the controllers start; a test waits for what it needs, e.g. a
  Certificate's ``Ready`` condition).
- **cainjector** (controller-runtime): ``--kubeconfig``, ``--leader-elect=false``;
  it opens no port (metrics ``"0"`` in its source). Ready: its log says ``Starting workers``
  (a controller-runtime controller started).

cert-manager's own webhook is not run: it validates and defaults cert-manager's resources, and no
ValidatingWebhookConfiguration or MutatingWebhookConfiguration of its own is installed, so the API
server never calls it.

Pure part: :func:`crd_manifests`, :func:`controller_command_line`, :func:`cainjector_command_line`.
Process part: :class:`CertManager` (CRDs, namespace, processes, readiness, logs).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Iterable

import yaml

from . import build, versions
from .cluster import ClusterError
from .procs import Proc, free_ports, spawn, tail, terminate, wait_http

__all__ = [
    "TOOL",
    "CLUSTER_RESOURCE_NAMESPACE",
    "crd_manifests",
    "controller_command_line",
    "cainjector_command_line",
    "CertManager",
    "CertManagerError",
]

#: Tool name (key of :data:`versions.TOOLS`).
TOOL = "cert-manager"
#: Namespace where the controller reads the Secrets of ClusterIssuers (``--cluster-resource-namespace``;
#: the cert-manager chart uses its release namespace, ``cert-manager`` in its docs).
CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
#: A log line of the cainjector once a controller-runtime controller runs.
CAINJECTOR_READY = "Starting workers"


class CertManagerError(RuntimeError):
    """cert-manager did not come up or could not be prepared; the message has the log tail."""


def crd_manifests(texts: Iterable[str]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of the YAML ``texts`` (cert-manager's ``deploy/crds`` files), each
    without the labels whose value is Helm template text (holding ``{{``); other labels are kept.
    Raises ``ValueError`` naming a document that is not a CustomResourceDefinition. Pure."""
    out = []
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if doc is None:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
                raise ValueError(f"expected CustomResourceDefinition documents, got {kind!r}")
            meta = dict(doc.get("metadata") or {})
            labels = {k: v for k, v in (meta.get("labels") or {}).items() if "{{" not in str(v)}
            if labels:
                meta["labels"] = labels
            else:
                meta.pop("labels", None)
            out.append({**doc, "metadata": meta})
    return out


def controller_command_line(binary: str | os.PathLike[str], kubeconfig: str | os.PathLike[str], metrics_port: int,
                            cluster_resource_namespace: str = CLUSTER_RESOURCE_NAMESPACE) -> list[str]:
    """argv of cert-manager's controller: all namespaces, no leader election, the default controllers,
    metrics on ``127.0.0.1:<metrics_port>``, ClusterIssuer Secrets in ``cluster_resource_namespace``,
    log at ``-v=2``. Raises ``ValueError`` for a port outside 1-65535 or an empty namespace."""
    if isinstance(metrics_port, bool) or not isinstance(metrics_port, int) or not 0 < metrics_port < 65536:
        raise ValueError(f"metrics_port: expected a TCP port, got {metrics_port!r}")
    if not cluster_resource_namespace:
        raise ValueError("cluster_resource_namespace: expected a namespace name, got ''")
    return [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--cluster-resource-namespace={cluster_resource_namespace}",
            f"--metrics-listen-address=127.0.0.1:{metrics_port}", "-v=2"]


def cainjector_command_line(binary: str | os.PathLike[str], kubeconfig: str | os.PathLike[str]) -> list[str]:
    """argv of cert-manager's cainjector: all namespaces, no leader election, log at ``-v=2``."""
    return [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false", "-v=2"]


class CertManager:
    """cert-manager's controller and cainjector running against ``cluster`` (needs ``kubeconfig`` and
    ``kubectl(*args)``), logging to ``<workdir>/cert-manager-controller.log`` and
    ``<workdir>/cert-manager-cainjector.log``.

    :meth:`start` applies the CRDs (server-side: the issuer CRDs are larger than client-side apply's
    annotation limit) and waits until Established, creates :data:`CLUSTER_RESOURCE_NAMESPACE`,
    starts both and waits until ready (``timeout`` s); raises :class:`CertManagerError` with the log
    tail. The binaries must be built (:func:`build.ensure_binaries` ``["cert-manager"]``).
    :meth:`stop` ends both; the CRDs and what was issued stay.
    """

    def __init__(self, cluster: Any, workdir: str | os.PathLike[str], *, timeout: float = 60.0) -> None:
        self.cluster = cluster
        self.workdir = Path(workdir)
        self.timeout = timeout
        self.procs: list[Proc] = []
        self.metrics_port = 0

    def log(self, component: str) -> Path:
        """Log file of ``component`` (``controller`` or ``cainjector``)."""
        return self.workdir / f"cert-manager-{component}.log"

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(f"--- {c}:\n{tail(self.log(c), lines)}" for c in ("controller", "cainjector"))

    def __enter__(self) -> "CertManager":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "CertManager":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.apply_crds()
        self._apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CLUSTER_RESOURCE_NAMESPACE}}],
                    "namespace")
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        (self.metrics_port,) = free_ports(1)
        try:
            controller = spawn("cert-manager controller",
                               controller_command_line(build.binary("controller"), self.cluster.kubeconfig,
                                                       self.metrics_port),
                               self.log("controller"), env=env)
            self.procs.append(controller)
            offset = self.log("cainjector").stat().st_size if self.log("cainjector").exists() else 0
            cainjector = spawn("cert-manager cainjector",
                               cainjector_command_line(build.binary("cainjector"), self.cluster.kubeconfig),
                               self.log("cainjector"), env=env)
            self.procs.append(cainjector)
            wait_http(controller, f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=self.timeout,
                      error=CertManagerError)
            self._wait_log(cainjector, CAINJECTOR_READY, offset)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM both (SIGKILL after ``grace`` s); raises :class:`CertManagerError` naming a
        process that survived."""
        procs, self.procs = self.procs, []
        problems = terminate(procs, grace)
        if problems:
            raise CertManagerError("; ".join(problems))

    def alive(self) -> bool:
        """Whether both processes run (False before :meth:`start` and after :meth:`stop`)."""
        return len(self.procs) == 2 and all(p.alive() for p in self.procs)

    def apply_crds(self) -> None:
        paths = build.crd_paths(TOOL)
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise CertManagerError(f"no cert-manager CRDs at {missing}; build them first "
                                   f"(python -m cogate.localcluster.build {TOOL})")
        crds = crd_manifests(p.read_text() for p in paths)
        self._apply(crds, "crds", server_side=True)
        self._wait_established([c["metadata"]["name"] for c in crds])

    # -- internals ------------------------------------------------------------
    def _apply(self, objects: list[dict[str, Any]], what: str, server_side: bool = False) -> None:
        path = self.workdir / f"cert-manager-{what}.yaml"
        path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        self.cluster.kubectl("apply", *(("--server-side", "--force-conflicts") if server_side else ()),
                             "-f", str(path))

    def _wait_established(self, names: list[str]) -> None:
        try:
            self.cluster.wait_crds_established(names, self.timeout)
        except ClusterError as exc:
            raise CertManagerError(f"cert-manager: {exc}") from exc

    def _wait_log(self, proc: Proc, text: str, offset: int) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            with contextlib.suppress(FileNotFoundError), open(proc.log, "rb") as fh:
                fh.seek(offset)
                if text.encode() in fh.read():
                    return
            if not proc.alive():
                raise CertManagerError(f"{proc.name} exited (code {proc.returncode}); last lines of "
                                       f"{proc.log}:\n{tail(proc.log)}")
            if time.monotonic() >= deadline:
                raise CertManagerError(f"{proc.name} did not log {text!r} within {self.timeout:.0f}s; last lines "
                                       f"of {proc.log}:\n{tail(proc.log)}")
            time.sleep(0.1)
