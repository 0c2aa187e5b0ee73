"""The real MPI operator and KubeRay, as local processes beside a :class:`~cogate.localcluster.cluster.LocalCluster`.

Both create scheduler-plugins PodGroups (``scheduling.x-k8s.io/v1alpha1``) and label their pods
``scheduling.x-k8s.io/pod-group``; the e2e tests run them against cogate (tests/e2e/test_operators.py).
Their binaries and CRDs are built into the binary cache like the control plane
(:data:`versions.OPERATOR_TOOLS`, :data:`versions.CRDS`, :mod:`build`).

What each needs to run out of the cluster (read from their sources, at the pinned tags):

- **MPI operator** (``cmd/mpi-operator/app/server.go``): its MPIJob CRD served before it starts
  (``checkCRDExists``: "CRD doesn't exist. Exiting", exit code 1), the namespace of its
  leader-election Lease (``--lock-namespace``, default ``mpi-operator``), ``--kubeConfig`` (that
  spelling). It always serves ``/healthz`` on ``:8080`` (the constant ``healthCheckPort``, all
  interfaces, no flag) and exits when that port is taken, so one MPI operator runs per machine at
  a time: :class:`Operator` holds the file lock ``<cache>/locks/mpi-operator-port-8080.lock``
  while it runs (a second test session waits for it). ``--gang-scheduling=<name>``: ``volcano``,
  else scheduler-plugins PodGroups, with ``<name>`` as every pod's ``schedulerName``
  (``pkg/controller/podgroup.go``: minMember = workers + 1 unless
  ``runPolicy.schedulingPolicy.minAvailable``, minResources = the requests of minMember pods,
  ``scheduleTimeoutSeconds`` 0 unless set). Ready: ``/healthz`` answers and its log says
  ``Leading started``. Its identity is ``<hostname>_<new UUID>`` and it does not give the Lease
  up when stopped, so a new process would wait out the old one's lease (15 s): :meth:`Operator.stop`
  deletes the Lease ``mpi-operator/mpi-operator`` once the process is gone.
- **KubeRay** (``ray-operator/main.go``, controller-runtime): the RayCluster, RayJob and RayService
  CRDs served (one controller each), ``KUBECONFIG``, ``--enable-leader-election=false``, metrics and
  probe addresses on free ports of 127.0.0.1 (defaults ``:8080`` and ``:8082``).
  ``--batch-scheduler=scheduler-plugins``: a RayCluster labelled ``ray.io/gang-scheduling-enabled``
  gets a PodGroup named after it (minMember = desired workers + 1 head, minResources = their
  requests) and every pod of it ``schedulerName: scheduler-plugins-scheduler`` (hard-coded,
  ``controllers/ray/batchscheduler/scheduler-plugins/scheduler_plugins.go``). Ready: ``/readyz``
  on the probe port.

- **training-operator** v1 (``cmd/training-operator.v1/main.go``, controller-runtime): it sets its
  controllers up only once its webhook certificates are ready, and those come from its rotator
  (open-policy-agent/cert-controller v0.16, ``pkg/cert/cert.go``), which keeps the Secret
  ``training-operator-webhook-cert`` of namespace ``kubeflow`` when its CA verifies for the DNS
  name ``training-operator-ca`` (an RSA key in PKCS#1: it parses it so) and its serving
  certificate for ``training-operator.kubeflow.svc``,
  then waits for the files in the fixed directory :data:`TRAINING_CERT_DIR` (the kubelet mounts
  the Secret there in a cluster). :class:`Operator` provides both from cogate's own CA code
  (``certs.pki``; the serving certificate also names 127.0.0.1), writes the files under the lock
  ``<cache>/locks/training-operator-certdir.lock`` (one run per machine), and registers the
  validating webhook ``validator.training-operator.kubeflow.org`` on
  ``https://127.0.0.1:<port>`` for PyTorchJobs, the one scheme it enables
  (``--enable-scheme=pytorchjob``: its other CRDs include a ``kubeflow.org/v1`` MPIJob that
  would replace the MPI operator's). ``--gang-scheduler-name=<name>``: ``volcano``, else
  scheduler-plugins PodGroups named after the job (minMember = all replicas unless
  ``runPolicy.schedulingPolicy.minAvailable``), ``<name>`` on pods whose template names no
  scheduler. Ready: ``/readyz`` on the probe port (true once the certificates are there and the
  webhook server listens) and its webhook path answers (it is registered later, with the
  controllers).
- **JobSet** (sigs.k8s.io/jobset ``main.go``, controller-runtime): ``--config`` names a
  ``config.jobset.x-k8s.io/v1alpha1`` Configuration (``api/config/v1alpha1``); with
  ``internalCertManagement.enable: false`` it skips its certificate rotator and serves its webhooks
  from ``webhook.certDir`` (``tls.crt``, ``tls.key``) on ``webhook.host:port``. :class:`Operator`
  writes that file (webhooks on a free port of 127.0.0.1 with a certificate from cogate's CA code,
  probes on 127.0.0.1, no leader election; metrics off, ``--metrics-bind-address=0``: it serves them
  over TLS only) and registers its four webhooks (``config/components/webhook`` with its patches:
  defaulting and validation of JobSets, and of the pods labelled ``jobset.sigs.k8s.io/jobset-name``)
  on ``https://127.0.0.1:<port>``; :meth:`Operator.stop` deletes them (failure policy Fail).
  Ready: ``/readyz`` (true once its webhook server listens) and its JobSet defaulting path answers.

Pure part: the command lines (:func:`mpi_operator_command_line`, :func:`kuberay_command_line`,
:func:`training_operator_command_line`, :func:`jobset_command_line`), :func:`jobset_configuration`,
:func:`jobset_webhook_configurations`.
Process part: :class:`Operator` (CRDs, namespace, process, readiness, logs, restart with other flags).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import ssl
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from cogate.certs import pki

from . import build, versions
from .cluster import ClusterError
from .procs import Proc, free_ports, spawn, tail, terminate, wait_http

__all__ = [
    "MPI_OPERATOR",
    "KUBERAY",
    "MPI_LOCK_NAMESPACE",
    "MPI_HEALTH_PORT",
    "MPI_LEASE",
    "TRAINING_OPERATOR",
    "TRAINING_CERT_DIR",
    "training_operator_command_line",
    "training_webhook_configuration",
    "JOBSET",
    "jobset_command_line",
    "jobset_configuration",
    "jobset_webhook_configurations",
    "CRD_NAMES",
    "mpi_operator_command_line",
    "kuberay_command_line",
    "Operator",
    "OperatorError",
]

#: Tool names (keys of :data:`versions.TOOLS`).
MPI_OPERATOR = "mpi-operator"
KUBERAY = "kuberay"
#: The MPI operator's leader-election namespace (its ``--lock-namespace`` default).
MPI_LOCK_NAMESPACE = "mpi-operator"
#: The MPI operator's ``/healthz`` port: a constant of its source, not a flag.
MPI_HEALTH_PORT = 8080
#: Its leader-election Lease (in :data:`MPI_LOCK_NAMESPACE`), named after the controller.
MPI_LEASE = "mpi-operator"
TRAINING_OPERATOR = "training-operator"
#: The training-operator's namespace (its default; ``MY_POD_NAMESPACE`` unset), Secret, Service
#: name in its certificate, CA name and webhook configuration (``pkg/cert/cert.go``, ``main.go``).
TRAINING_NAMESPACE = "kubeflow"
TRAINING_SECRET = "training-operator-webhook-cert"
TRAINING_DNS_NAME = f"training-operator.{TRAINING_NAMESPACE}.svc"
TRAINING_CA_NAME = "training-operator-ca"
TRAINING_WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
#: Its PyTorchJob validation path (``manifests/base/webhook/manifests.yaml``).
TRAINING_WEBHOOK_PATH = "/validate-kubeflow-org-v1-pytorchjob"
#: The rotator's certificate directory: a constant of its source (``certDir``), not a flag.
TRAINING_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
JOBSET = "jobset"
#: JobSet's webhook configurations (upstream's names with the ``jobset-`` prefix of its kustomization).
JOBSET_WEBHOOK_CONFIGURATIONS = ("jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration")
#: Its JobSet defaulting path (``pkg/webhooks/jobset_webhook.go``).
JOBSET_WEBHOOK_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
#: CRDs each operator needs Established before it starts (names of :data:`versions.CRDS`' files).
CRD_NAMES: dict[str, tuple[str, ...]] = {
    MPI_OPERATOR: ("mpijobs.kubeflow.org",),
    KUBERAY: ("rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"),
    TRAINING_OPERATOR: ("pytorchjobs.kubeflow.org",),
    JOBSET: ("jobsets.jobset.x-k8s.io",),
}


class OperatorError(RuntimeError):
    """An operator did not come up or could not be prepared; the message has its log tail."""


def mpi_operator_command_line(binary: str | os.PathLike[str], kubeconfig: str | os.PathLike[str],
                              gang_scheduling: str | None) -> list[str]:
    """argv of the MPI operator: all namespaces, metrics off (``--monitoring-port=0``), lock in
    :data:`MPI_LOCK_NAMESPACE`, ``--gang-scheduling=<gang_scheduling>`` unless None (no PodGroups
    then), client QPS 50 / burst 100 (defaults 5 / 10 throttle a test's burst of pods), log at ``-v=2``."""
    args = [str(binary), f"--kubeConfig={kubeconfig}", "--monitoring-port=0", f"--lock-namespace={MPI_LOCK_NAMESPACE}",
            "--kube-api-qps=50", "--kube-api-burst=100", "-v=2"]
    if gang_scheduling is not None:
        if not gang_scheduling:
            raise ValueError("gang_scheduling: expected a scheduler name (or None), got ''")
        args.append(f"--gang-scheduling={gang_scheduling}")
    return args


def kuberay_command_line(binary: str | os.PathLike[str], batch_scheduler: str | None, metrics_port: int,
                         probe_port: int) -> list[str]:
    """argv of KubeRay's operator (the kubeconfig comes from ``KUBECONFIG``): no leader election,
    metrics and probes on ``127.0.0.1:<metrics_port>`` / ``127.0.0.1:<probe_port>``,
    ``--batch-scheduler=<batch_scheduler>`` unless None, console logs."""
    _check_ports(metrics_port=metrics_port, probe_port=probe_port)
    args = [str(binary), "--enable-leader-election=false", f"--metrics-addr=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}", "--log-stdout-encoder=console"]
    if batch_scheduler is not None:
        args.append(f"--batch-scheduler={batch_scheduler}")
    return args


def _check_ports(**ports: int) -> None:
    for what, port in ports.items():
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"{what}: expected a TCP port, got {port!r}")


def training_operator_command_line(binary: str | os.PathLike[str], gang_scheduler: str | None, webhook_port: int,
                                   metrics_port: int, probe_port: int) -> list[str]:
    """argv of the training-operator (the kubeconfig comes from ``KUBECONFIG``): PyTorchJobs only,
    its webhook server on ``webhook_port`` (every interface: the source has no address flag),
    metrics and probes on 127.0.0.1, no leader election, ``--gang-scheduler-name`` unless None."""
    _check_ports(webhook_port=webhook_port, metrics_port=metrics_port, probe_port=probe_port)
    args = [str(binary), "--enable-scheme=pytorchjob", f"--webhook-server-port={webhook_port}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}", f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--leader-elect=false"]
    if gang_scheduler is not None:
        args.append(f"--gang-scheduler-name={gang_scheduler}")
    return args


def training_webhook_configuration(port: int, ca_pem: bytes) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration the training-operator's rotator looks after, with its
    PyTorchJob entry (``manifests/base/webhook/manifests.yaml``) on ``https://127.0.0.1:<port>``
    instead of its Service, trusting ``ca_pem``."""
    _check_ports(port=port)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": TRAINING_WEBHOOK_CONFIGURATION},
            "webhooks": [{
                "name": "validator.pytorchjob.training-operator.kubeflow.org",
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}{TRAINING_WEBHOOK_PATH}",
                                 "caBundle": base64.b64encode(ca_pem).decode()},
                "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": ["pytorchjobs"]}]}]}


def jobset_command_line(binary: str | os.PathLike[str], config: str | os.PathLike[str]) -> list[str]:
    """argv of JobSet's controller (the kubeconfig comes from ``KUBECONFIG``): its Configuration file
    ``config`` (:func:`jobset_configuration`), metrics off (served over TLS only), no leader election."""
    return [str(binary), f"--config={config}", "--metrics-bind-address=0", "--leader-elect=false"]


def jobset_configuration(webhook_port: int, probe_port: int, cert_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """JobSet's ``config.jobset.x-k8s.io/v1alpha1`` Configuration for a process outside the cluster:
    webhooks on ``127.0.0.1:<webhook_port>`` from ``cert_dir``, probes on ``127.0.0.1:<probe_port>``,
    its own certificate rotator off (it would keep a Secret for an in-cluster Service)."""
    _check_ports(webhook_port=webhook_port, probe_port=probe_port)
    return {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"}}


def jobset_webhook_configurations(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """JobSet's Mutating- and ValidatingWebhookConfiguration (``config/components/webhook`` with its
    patches: the pod webhooks only for pods labelled ``jobset.sigs.k8s.io/jobset-name``) on
    ``https://127.0.0.1:<port>`` instead of its Service, trusting ``ca_pem``."""
    _check_ports(port=port)
    ca = base64.b64encode(ca_pem).decode()

    def hook(name: str, path: str, group: str, version: str, resource: str, operations: list[str]) -> dict[str, Any]:
        h: dict[str, Any] = {
            "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
            "rules": [{"apiGroups": [group], "apiVersions": [version], "operations": operations,
                       "resources": [resource]}]}
        if resource == "pods":
            h["objectSelector"] = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name",
                                                         "operator": "Exists"}]}
        return h

    mutating, validating = JOBSET_WEBHOOK_CONFIGURATIONS
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": mutating},
         "webhooks": [hook("mjobset.kb.io", JOBSET_WEBHOOK_PATH, "jobset.x-k8s.io", "v1alpha2", "jobsets", ["CREATE"]),
                      hook("mpod.kb.io", "/mutate--v1-pod", "", "v1", "pods", ["CREATE"])]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": validating},
         "webhooks": [hook("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io",
                           "v1alpha2", "jobsets", ["CREATE", "UPDATE"]),
                      hook("vpod.kb.io", "/validate--v1-pod", "", "v1", "pods", ["CREATE"])]},
    ]


class Operator:
    """One operator (``tool``: :data:`MPI_OPERATOR`, :data:`KUBERAY`, :data:`TRAINING_OPERATOR` or
    :data:`JOBSET`)
    running against ``cluster`` (needs ``kubeconfig`` and ``kubectl(*args)``), logging to
    ``<workdir>/<tool>.log``.

    ``scheduler``: the MPI operator's ``--gang-scheduling``, KubeRay's ``--batch-scheduler`` or the
    training-operator's ``--gang-scheduler-name`` (None: off; JobSet has none). :meth:`start` applies the CRDs
    (server-side: KubeRay's are larger than client-side apply's annotation limit) and waits until
    Established, creates what the operator needs (namespaces; the training-operator's certificates
    and webhook configuration), starts it and waits until ready (``timeout`` s); raises
    :class:`OperatorError` with the log tail. The binaries must be built
    (:func:`build.ensure_binaries`)."""

    def __init__(self, tool: str, cluster: Any, workdir: str | os.PathLike[str], scheduler: str | None, *,
                 timeout: float = 60.0) -> None:
        if tool not in CRD_NAMES:
            raise ValueError(f"tool: expected one of {sorted(CRD_NAMES)}, got {tool!r}")
        self.tool = tool
        self.cluster = cluster
        self.workdir = Path(workdir)
        self.scheduler = scheduler
        self.timeout = timeout
        self.proc: Proc | None = None
        self._lock = contextlib.ExitStack()
        self._ca_pem = b""  # the training-operator's CA (PEM) and its certificate files' directory
        self._certs = self.workdir / f"{tool}-certs"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.tool}.log"

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log, lines)

    def __enter__(self) -> "Operator":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "Operator":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.apply_crds()
        if self.tool == MPI_OPERATOR:
            self._apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MPI_LOCK_NAMESPACE}}])
        if self.tool == TRAINING_OPERATOR:
            self._ca_pem = self._training_certificates()
        if self.tool == JOBSET:
            self._ca_pem = self._local_certificates()
        self._spawn()
        return self

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM (SIGKILL after ``grace`` s); the MPI operator's Lease deleted (module doc), the
        training-operator's webhook configuration (failurePolicy Fail: it would refuse every later
        PyTorchJob) and certificate files removed, their locks released."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None:
                problems = terminate([proc], grace)
                if problems:
                    raise OperatorError("; ".join(problems))
                if self.tool == MPI_OPERATOR:
                    self.cluster.kubectl("delete", "lease", "-n", MPI_LOCK_NAMESPACE, MPI_LEASE,
                                         "--ignore-not-found", check=False)
                if self.tool == TRAINING_OPERATOR:
                    self.cluster.kubectl("delete", "validatingwebhookconfiguration", TRAINING_WEBHOOK_CONFIGURATION,
                                         "--ignore-not-found", check=False)
                    for name in ("ca.crt", "tls.crt", "tls.key"):
                        (TRAINING_CERT_DIR / name).unlink(missing_ok=True)
                if self.tool == JOBSET:
                    mutating, validating = JOBSET_WEBHOOK_CONFIGURATIONS
                    self.cluster.kubectl("delete", f"mutatingwebhookconfiguration/{mutating}",
                                         f"validatingwebhookconfiguration/{validating}", "--ignore-not-found",
                                         check=False)
        finally:
            self._lock.close()

    def restart(self, scheduler: str | None) -> None:
        """Stop and start again with ``scheduler`` (the CRDs stay)."""
        self.stop()
        self.scheduler = scheduler
        self._spawn()

    def apply_crds(self) -> None:
        for path in build.crd_paths(self.tool):
            if not path.is_file():
                raise OperatorError(f"{self.tool}: no CRD at {path}; build it first "
                                    f"(python -m cogate.localcluster.build {self.tool})")
            self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        self._wait_established(CRD_NAMES[self.tool])

    # -- internals ------------------------------------------------------------
    def _wait_established(self, names: Sequence[str]) -> None:
        try:
            self.cluster.wait_crds_established(names, self.timeout)
        except ClusterError as exc:
            raise OperatorError(f"{self.tool}: {exc}") from exc

    def _apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        path = self.workdir / f"{self.tool}-objects.yaml"
        path.write_text(yaml.safe_dump_all(list(objects), sort_keys=False))
        self.cluster.kubectl("apply", "-f", str(path))

    def _spawn(self) -> None:
        binary = build.binary(versions.BINARIES[self.tool][0])
        offset = self.log.stat().st_size if self.log.exists() else 0
        if self.tool == MPI_OPERATOR:
            self._lock.enter_context(build.build_lock(f"{MPI_OPERATOR}-port-{MPI_HEALTH_PORT}"))
            argv = mpi_operator_command_line(binary, self.cluster.kubeconfig, self.scheduler)
            self.proc = spawn(self.tool, argv, self.log)
            try:
                wait_http(self.proc, f"http://127.0.0.1:{MPI_HEALTH_PORT}/healthz", timeout=self.timeout,
                          error=OperatorError)
                self._wait_log("Leading started", offset)
            except BaseException:
                self.stop()
                raise
            return
        if self.tool == TRAINING_OPERATOR:
            self._lock.enter_context(build.build_lock(f"{TRAINING_OPERATOR}-certdir"))
            self._write_cert_dir()
            webhook, metrics, probe = free_ports(3)
            self._apply([training_webhook_configuration(webhook, self._ca_pem)])
            argv = training_operator_command_line(binary, self.scheduler, webhook, metrics, probe)
        elif self.tool == JOBSET:
            webhook, probe = free_ports(2)
            config = self.workdir / "jobset-config.yaml"
            config.write_text(yaml.safe_dump(jobset_configuration(webhook, probe, self._certs), sort_keys=False))
            self._apply(jobset_webhook_configurations(webhook, self._ca_pem))
            argv = jobset_command_line(binary, config)
        else:
            metrics, probe = free_ports(2)
            argv = kuberay_command_line(binary, self.scheduler, metrics, probe)
        self.proc = spawn(self.tool, argv, self.log, env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)))
        try:
            wait_http(self.proc, f"http://127.0.0.1:{probe}/readyz", timeout=self.timeout, error=OperatorError)
            if self.tool == JOBSET:
                wait_http(self.proc, f"https://127.0.0.1:{webhook}{JOBSET_WEBHOOK_PATH}", timeout=self.timeout,
                          context=ssl.create_default_context(cafile=str(self._certs / "ca.crt")),
                          data=b"{}", headers={"Content-Type": "application/json"}, statuses=(200, 400),
                          what=f"its webhook path {JOBSET_WEBHOOK_PATH}", error=OperatorError)
            if self.tool == TRAINING_OPERATOR:
                # /readyz turns ready once its webhook server listens, but the paths come later,
                # with the controllers (setupControllers): until then it answers 404 and the API
                # server refuses every PyTorchJob ("failed calling webhook ... could not find the
                # requested resource"). An empty review is answered 200 or 400 once it is served.
                wait_http(self.proc, f"https://127.0.0.1:{webhook}{TRAINING_WEBHOOK_PATH}", timeout=self.timeout,
                          context=ssl.create_default_context(cafile=str(self._certs / "ca.crt")),
                          data=b"{}", headers={"Content-Type": "application/json"}, statuses=(200, 400),
                          what=f"its webhook path {TRAINING_WEBHOOK_PATH}", error=OperatorError)
        except BaseException:
            self.stop()
            raise

    def _training_certificates(self) -> bytes:
        """The namespace and the Secret the training-operator's rotator keeps (module doc): a CA
        named and DNS-named ``training-operator-ca``, a serving certificate for its Service name and
        127.0.0.1; the PEM files also kept in ``<workdir>/training-operator-certs``. Returns the CA."""
        ca_cert, ca_key = pki.new_ca(TRAINING_CA_NAME, days=3650, dns_names=(TRAINING_CA_NAME,),
                                     key=pki.new_rsa_key())  # it reads the CA key as PKCS#1 RSA
        cert, key = pki.issue(ca_cert, ca_key, "training-operator", days=3650, dns_names=(TRAINING_DNS_NAME,),
                              ip_addresses=("127.0.0.1",), server=True)
        files = {"ca.crt": pki.cert_to_pem(ca_cert), "ca.key": pki.key_to_pem(ca_key, traditional=True),
                 "tls.crt": pki.cert_to_pem(cert), "tls.key": pki.key_to_pem(key)}
        self._certs.mkdir(parents=True, exist_ok=True)
        for name, pem in files.items():
            (self._certs / name).write_bytes(pem)
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": TRAINING_SECRET, "namespace": TRAINING_NAMESPACE},
                  "data": {name: base64.b64encode(pem).decode() for name, pem in files.items()}}
        self._apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRAINING_NAMESPACE}}, secret])
        return files["ca.crt"]

    def _local_certificates(self) -> bytes:
        """A CA and a serving certificate for 127.0.0.1 in ``<workdir>/<tool>-certs`` (``ca.crt``,
        ``tls.crt``, ``tls.key``: controller-runtime's file names); returns the CA (PEM)."""
        ca_cert, ca_key = pki.new_ca(f"{self.tool}-ca", days=3650)
        cert, key = pki.issue(ca_cert, ca_key, self.tool, days=3650, ip_addresses=("127.0.0.1",), server=True)
        files = {"ca.crt": pki.cert_to_pem(ca_cert), "tls.crt": pki.cert_to_pem(cert), "tls.key": pki.key_to_pem(key)}
        self._certs.mkdir(parents=True, exist_ok=True)
        for name, pem in files.items():
            (self._certs / name).write_bytes(pem)
        return files["ca.crt"]

    def _write_cert_dir(self) -> None:
        TRAINING_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("ca.crt", "tls.crt", "tls.key"):
            shutil.copyfile(self._certs / name, TRAINING_CERT_DIR / name)

    def _wait_log(self, text: str, offset: int) -> None:
        deadline = time.monotonic() + self.timeout
        assert self.proc is not None
        while True:
            with open(self.log, "rb") as fh:
                fh.seek(offset)
                if text.encode() in fh.read():
                    return
            if not self.proc.alive():
                raise OperatorError(f"{self.tool} exited (code {self.proc.returncode}); last lines of "
                                    f"{self.log}:\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                raise OperatorError(f"{self.tool} did not log {text!r} within {self.timeout:.0f}s; last lines of "
                                    f"{self.log}:\n{self.log_tail()}")
            time.sleep(0.1)
