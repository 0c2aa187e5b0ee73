"""Kueue's controller manager as a local process beside a :class:`~cogate.localcluster.cluster.LocalCluster`.

For the topology benchmark only (``bench/bench_topology_native.py``, issue 32 item 6): Kueue's
Topology Aware Scheduling (TAS, beta and on by default in 0.17) places the same gang streams as
cogate and kube-scheduler's own topology-aware workload scheduling. Its binary, its CRDs and its
webhook manifests are built into the binary cache like the operators' (:data:`versions.KUEUE`,
:data:`versions.CRDS`, :mod:`build`), but only on first use (:data:`versions.BENCH_TOOLS`: no
``make`` target and no CI step builds it).

What it needs to run out of the cluster (read from ``cmd/kueue/main.go`` and
``apis/config/v1beta2`` at the pinned tag):

- its eleven CRDs served (``config/components/crd/bases``; the controllers of every kind start,
  MultiKueue's and ProvisioningRequestConfig's included) and its namespace (``namespace`` of the
  Configuration, default ``kueue-system``);
- a ``config.kueue.x-k8s.io/v1beta2`` Configuration (``--config``, :func:`kueue_configuration`):
  ``internalCertManagement.enable: false`` (its rotator keeps a Secret for an in-cluster Service
  name, which a URL on 127.0.0.1 does not match), webhooks on ``webhook.host:port`` from
  ``webhook.certDir`` (``tls.crt``, ``tls.key``), probes on 127.0.0.1, no leader election,
  the ``batch/job`` integration only, ``VisibilityOnDemand`` off (its aggregated API server needs
  an APIService and in-cluster authentication);
- with its own certificate management off it always watches the metrics certificate in the fixed
  directory :data:`METRICS_CERT_DIR` (``certwatcher.New`` fails when the files are missing), even with
  metrics off (``metrics.bindAddress: "0"``): :class:`Kueue` writes a certificate there from cogate's
  CA code, under the lock ``<cache>/locks/kueue-metrics-certs.lock`` (one run per machine);
- its webhooks registered on ``https://127.0.0.1:<port>``: the entries of
  ``config/components/webhook/manifests.yaml`` for batch Jobs and Kueue's own kinds
  (:func:`kueue_webhook_configurations`; the others' paths are not served with one integration,
  and failure policy Fail would refuse every pod or Deployment). The Job defaulting webhook
  suspends a Job labelled ``kueue.x-k8s.io/queue-name`` at creation, so no pod starts before
  admission.

Ready: ``/readyz`` on the probe port and its Job defaulting path answers.

Pure part: :func:`kueue_command_line`, :func:`kueue_configuration`, :func:`kueue_webhook_configurations`.
Process part: :class:`Kueue`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import ssl
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from cogate.certs import pki

from . import build, versions
from .cluster import ClusterError
from .procs import Proc, free_ports, spawn, tail, terminate, wait_http

__all__ = ["KUEUE", "NAMESPACE", "CRD_NAMES", "METRICS_CERT_DIR", "WEBHOOK_MANIFESTS", "kueue_command_line",
           "kueue_configuration", "kueue_webhook_configurations", "Kueue", "KueueError"]

#: Tool name (key of :data:`versions.TOOLS`).
KUEUE = "kueue"
#: Its namespace (the Configuration's ``namespace``; upstream's default).
NAMESPACE = "kueue-system"
#: Its CRDs (:data:`versions.CRDS`), Established before it starts.
CRD_NAMES = tuple(f"{k}.kueue.x-k8s.io" for k in (
    "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
    "provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"))
#: The webhook manifests copied beside the CRDs (base name of their entry in :data:`versions.CRDS`).
WEBHOOK_MANIFESTS = "manifests.yaml"
#: The metrics certificate directory: a constant of ``cmd/kueue/main.go``, not a setting.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: Its Job defaulting path (``config/components/webhook/manifests.yaml``).
JOB_WEBHOOK_PATH = "/mutate-batch-v1-job"
#: Upstream's configuration names with the ``kueue-`` prefix of its kustomization.
WEBHOOK_CONFIGURATIONS = ("kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration")
#: Kinds whose webhooks are registered: (API group, resource).
SERVED = {("batch", "jobs"), ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "cohorts"),
          ("kueue.x-k8s.io", "resourceflavors"), ("kueue.x-k8s.io", "workloads"),
          ("kueue.x-k8s.io", "workloads/status")}


class KueueError(RuntimeError):
    """Kueue did not come up or could not be prepared; the message has its log tail."""


def _check_port(what: str, port: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"{what}: expected a TCP port, got {port!r}")


def kueue_command_line(binary: str | os.PathLike[str], config: str | os.PathLike[str]) -> list[str]:
    """argv of Kueue's controller manager (the kubeconfig comes from ``KUBECONFIG``): its
    Configuration file ``config`` (:func:`kueue_configuration`), log at ``--zap-log-level=2``."""
    return [str(binary), f"--config={config}", "--zap-log-level=2"]


def kueue_configuration(webhook_port: int, probe_port: int, cert_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Kueue's ``config.kueue.x-k8s.io/v1beta2`` Configuration for a process outside the cluster
    (module doc): webhooks on ``127.0.0.1:<webhook_port>`` from ``cert_dir``, probes on
    ``127.0.0.1:<probe_port>``, metrics off, no leader election, its certificate management off,
    ``batch/job`` only, client QPS 50 / burst 100 (upstream's manifest), ``VisibilityOnDemand`` off.
    TAS is on by default (feature gate ``TopologyAwareScheduling``, beta since 0.14). Raises
    ValueError for a port out of range."""
    _check_port("webhook_port", webhook_port)
    _check_port("probe_port", probe_port)
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": ["batch/job"]},
            "featureGates": {"VisibilityOnDemand": False}}


def kueue_webhook_configurations(manifests: Iterable[Mapping[str, Any]], port: int,
                                 ca_pem: bytes) -> list[dict[str, Any]]:
    """Upstream's Mutating- and ValidatingWebhookConfiguration (``manifests``: the documents of
    ``config/components/webhook/manifests.yaml``), keeping the webhooks whose every rule is about a
    kind of :data:`SERVED`, each calling ``https://127.0.0.1:<port><its path>`` (instead of its
    Service) and trusting ``ca_pem``; named as its kustomization names them. Pure. Raises
    ValueError for a port out of range or a webhook without a service path."""
    _check_port("port", port)
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in manifests:
        hooks = []
        for hook in doc.get("webhooks") or []:
            kinds = {(g, r) for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []
                     for r in rule.get("resources") or []}
            if not kinds or not kinds <= SERVED:
                continue
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path")
            if not path:
                raise ValueError(f"webhook {hook.get('name')!r}: no clientConfig.service.path")
            hooks.append({**hook, "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}})
        name = f"kueue-{doc['metadata']['name']}"
        out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": {"name": name},
                    "webhooks": hooks})
    return out


class Kueue:
    """Kueue's controller manager running against ``cluster`` (needs ``kubeconfig``, ``kubectl(*args)``
    and ``wait_crds_established``), logging to ``<workdir>/kueue.log``. Use as a context manager.

    :meth:`start` applies its CRDs (server-side) and waits until Established, creates its namespace,
    writes its certificates (module doc) and Configuration, registers its webhooks, starts it and
    waits until ready (``timeout`` s); raises :class:`KueueError` with the log tail. :meth:`stop`
    ends it, deletes its webhook configurations (failure policy Fail) and the metrics certificate.
    The binary must be built (``build.ensure_binaries(["kueue"])``)."""

    def __init__(self, cluster: Any, workdir: str | os.PathLike[str], *, timeout: float = 90.0) -> None:
        self.cluster = cluster
        self.workdir = Path(workdir)
        self.timeout = timeout
        self.proc: Proc | None = None
        self._lock = contextlib.ExitStack()
        self._certs = self.workdir / "kueue-certs"

    @property
    def log(self) -> Path:
        return self.workdir / "kueue.log"

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log, lines)

    def __enter__(self) -> "Kueue":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "Kueue":
        self.workdir.mkdir(parents=True, exist_ok=True)
        paths = build.crd_paths(KUEUE)
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise KueueError(f"kueue: no {missing}; build it first (python -m cogate.localcluster.build kueue)")
        for path in paths:
            if path.name != WEBHOOK_MANIFESTS:
                self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        try:
            self.cluster.wait_crds_established(CRD_NAMES, self.timeout)
        except ClusterError as exc:
            raise KueueError(f"kueue: {exc}") from exc
        ca_pem = self._certificates()
        manifests = next(p for p in paths if p.name == WEBHOOK_MANIFESTS)
        webhook, probe = free_ports(2)
        self._apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                     *kueue_webhook_configurations(yaml.safe_load_all(manifests.read_text()), webhook, ca_pem)])
        config = self.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(kueue_configuration(webhook, probe, self._certs), sort_keys=False))
        argv = kueue_command_line(build.binary(versions.BINARIES[KUEUE][0]), config)
        self.proc = spawn(KUEUE, argv, self.log, env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)))
        try:
            wait_http(self.proc, f"http://127.0.0.1:{probe}/readyz", timeout=self.timeout, error=KueueError)
            wait_http(self.proc, f"https://127.0.0.1:{webhook}{JOB_WEBHOOK_PATH}", timeout=self.timeout,
                      context=ssl.create_default_context(cafile=str(self._certs / "ca.crt")),
                      data=b"{}", headers={"Content-Type": "application/json"}, statuses=(200, 400),
                      what=f"its webhook path {JOB_WEBHOOK_PATH}", error=KueueError)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        try:
            if proc is not None:
                problems = terminate([proc], grace)
                if problems:
                    raise KueueError("; ".join(problems))
            mutating, validating = WEBHOOK_CONFIGURATIONS
            self.cluster.kubectl("delete", f"mutatingwebhookconfiguration/{mutating}",
                                 f"validatingwebhookconfiguration/{validating}", "--ignore-not-found", check=False)
            for name in ("tls.crt", "tls.key"):
                (METRICS_CERT_DIR / name).unlink(missing_ok=True)
        finally:
            self._lock.close()

    def _apply(self, objects: list[Mapping[str, Any]]) -> None:
        path = self.workdir / "kueue-objects.yaml"
        path.write_text(yaml.safe_dump_all(list(objects), sort_keys=False))
        self.cluster.kubectl("apply", "-f", str(path))

    def _certificates(self) -> bytes:
        """A CA and a serving certificate for 127.0.0.1 in ``<workdir>/kueue-certs`` (webhooks), the
        same pair in :data:`METRICS_CERT_DIR` (under its lock); returns the CA (PEM)."""
        ca_cert, ca_key = pki.new_ca("kueue-ca", days=3650)
        cert, key = pki.issue(ca_cert, ca_key, "kueue", days=3650, ip_addresses=("127.0.0.1",), server=True)
        files = {"ca.crt": pki.cert_to_pem(ca_cert), "tls.crt": pki.cert_to_pem(cert), "tls.key": pki.key_to_pem(key)}
        self._certs.mkdir(parents=True, exist_ok=True)
        for name, pem in files.items():
            (self._certs / name).write_bytes(pem)
        self._lock.enter_context(build.build_lock("kueue-metrics-certs"))
        METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copyfile(self._certs / name, METRICS_CERT_DIR / name)
        return files["ca.crt"]
