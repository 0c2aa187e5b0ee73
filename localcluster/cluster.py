"""A real Kubernetes control plane on 127.0.0.1, started and stopped from Python.

:class:`LocalCluster` runs the Go binaries built by :mod:`cogate.localcluster.build`
(pinned in :mod:`cogate.localcluster.versions`) as child processes:

========================  ==================================================================
etcd                      plain HTTP on 127.0.0.1, data in ``<workdir>/etcd``, ``--unsafe-no-fsync``
kube-apiserver            HTTPS, client-certificate auth, ``Node,RBAC`` authorization, admission
                          incl. MutatingAdmissionWebhook/ValidatingAdmissionWebhook, service
                          accounts (issuer ``https://kubernetes.default.svc.cluster.local``),
                          service range :data:`SERVICE_CIDR` (``kubernetes`` service at
                          :data:`KUBERNETES_SERVICE_IP`)
kube-scheduler            default profile, no leader election
kube-controller-manager   ``--controllers=*`` minus the cloud ones (ReplicaSet, Deployment, Job,
                          garbage collector, node lifecycle, service accounts, ...), signing
                          service-account tokens and CSRs with the cluster's keys
kwok                      fake kubelets for nodes annotated ``kwok.x-k8s.io/node=fake``
                          (stages in ``kwok-stages.yaml``; see :mod:`cogate.localcluster.nodes`)
cluster-autoscaler        only with ``autoscaler=``: the real cluster-autoscaler with its kwok
                          cloud provider, creating kwok nodes of the given node groups
                          (:mod:`cogate.localcluster.autoscaler`)
========================  ==================================================================

Every port is a free one picked at start; every certificate comes from
:mod:`cogate.certs.pki` (one CA; apiserver serving cert for 127.0.0.1, localhost and
the ``kubernetes`` service names/IP; client certs for admin (``system:masters``),
kube-scheduler, kube-controller-manager and kwok; an ECDSA service-account key pair).
Each component logs to ``<workdir>/<component>.log``.

Use (tests, the demo)::

    from cogate.localcluster.cluster import LocalCluster

    with LocalCluster() as cluster:          # start() ... stop()
        cluster.add_nodes(2, cpu="8", memory="16Gi")
        cluster.kubectl("get", "nodes")       # subprocess.CompletedProcess, text output
        api = cluster.api_client()            # kubernetes.client.ApiClient (admin)
        print(cluster.kubeconfig)             # Path of the admin kubeconfig

Persist it in the background (``cogate dev up`` / ``cogate dev down``)::

    cluster = LocalCluster(workdir=Path("~/.cache/cogate/dev").expanduser(), keep=True)
    state_path = cluster.start(detach=True)   # returns <workdir>/state.json; processes keep running
    ...                                       # this Python process may exit
    LocalCluster.stop_from_state(state_path)  # from any process: stop all, free ports, rm workdir
    LocalCluster.read_state(state_path)       # dict: pids, ports, kubeconfig, server, ...

``start()`` raises :class:`ClusterError` (with the failing component's log tail) when a
component exits or is not ready within ``timeout`` seconds, after stopping what it had
started. ``stop()`` sends SIGTERM to every process it started (by pid, reverse start order),
SIGKILL after ``grace`` seconds, waits until none of the cluster's ports accepts
connections, and removes the work dir unless ``keep=True``. Processes run in their own
session, so a Ctrl-C in the terminal reaches only the Python process, whose ``atexit``
hook then stops an undetached cluster.

Readiness means: etcd ``/health``; apiserver ``/readyz``; scheduler and controller-manager
``/healthz``; the ``default`` ServiceAccount exists in namespace ``default`` (so pods can be
created); kwok is running; cluster-autoscaler (when asked for) answers ``/health-check``.

``restart_scheduler(*flags)`` makes a new kube-scheduler process (its flags, then ``flags``; a
later flag wins, e.g. ``--leader-elect=true``) and waits until it is healthy: a kube-scheduler
restart or failover, for tests.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import yaml

from cogate.certs import pki

from . import build, versions
from .autoscaler import AutoscalerSpec, NodeGroup
from .host import NODE_COMPONENTS, NODE_IP
from .kubeconfig import write_client as write_kubeconfig
from .procs import Proc, free_ports, mounts, rss_bytes, spawn, tail, terminate, wait_http, wait_ports_closed

if TYPE_CHECKING:
    from .host.realnode import RealNode

__all__ = [
    "LocalCluster",
    "ClusterError",
    "SERVICE_CIDR",
    "KUBERNETES_SERVICE_IP",
    "SERVICE_ACCOUNT_ISSUER",
]

#: Service ClusterIP range of the apiserver (``--service-cluster-ip-range``).
SERVICE_CIDR = "10.96.0.0/16"
#: First address of :data:`SERVICE_CIDR`: the ``kubernetes`` service, in the apiserver's SANs.
KUBERNETES_SERVICE_IP = "10.96.0.1"
#: ``iss`` of service-account tokens.
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Annotation kwok's ``--manage-nodes-with-annotation-selector`` selects (see nodes.py).
KWOK_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"
#: Lease duration kwok sets on node Leases (seconds); the node lifecycle controller's
#: grace period (50 s default) is longer, so a live kwok keeps its nodes Ready.
NODE_LEASE_SECONDS = 40
#: Order in which components start; they stop in reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
#: The optional autoscaler's component name (process, log, kubeconfig, port, extra_args key).
AUTOSCALER = "cluster-autoscaler"
STATE_FILE = "state.json"
STAGES_FILE = Path(__file__).with_name("kwok-stages.yaml")


class ClusterError(RuntimeError):
    """The control plane could not be started, queried or stopped; the message says which
    component and, for start failures, ends with its log tail."""


@contextlib.contextmanager
def _real_node_errors(prefix: str = "real node: "):
    """Report a failure of the real node (:class:`~cogate.localcluster.host.realnode.NodeSetupError`)
    as a :class:`ClusterError` whose message starts with ``prefix``."""
    from .host.realnode import NodeSetupError

    try:
        yield
    except NodeSetupError as exc:
        raise ClusterError(f"{prefix}{exc}") from None


# ------------------------------------------------------------------ the cluster

def wait_crds_established(kubectl: Any, names: Sequence[str], timeout: float = 60.0) -> None:
    """Poll, with ``kubectl`` (``LocalCluster.kubectl``'s signature), until every CRD of ``names`` has
    ``Established=True``. (``kubectl wait --for=condition=Established`` right after the apply fails
    with ".status.conditions accessor error" while the API server has not written any condition
    yet.) Raises :class:`ClusterError` naming the CRDs not Established after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = json.loads(kubectl("get", "-o", "json", *(f"crd/{n}" for n in names)).stdout)
        items = got.get("items", [got]) if got.get("kind") == "List" else [got]
        missing = [(i.get("metadata") or {}).get("name") for i in items
                   if not any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in (i.get("status") or {}).get("conditions") or [])]
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(f"CRDs {missing} not Established after {timeout:.0f}s")
        time.sleep(0.2)


class LocalCluster:
    """kube-apiserver + etcd + kube-scheduler + kube-controller-manager + kwok on 127.0.0.1.

    ``workdir``: where certificates, kubeconfigs, etcd data, logs and the state file go; a
    new temporary directory when omitted; must be empty or absent when given.
    ``keep``: keep the work dir on :meth:`stop` (for post-mortems; env ``COGATE_KEEP_CLUSTER=1``
    sets it too). ``timeout``: seconds each component gets to become ready.
    ``extra_args``: per-component extra flags, e.g. ``{"kube-apiserver": ["--v=4"]}``.
    ``real_node``: also run a real kubelet node, :data:`~cogate.localcluster.host.NODE_NAME`
    (containerd, kubelet, kube-proxy; see :mod:`cogate.localcluster.host.realnode`, imported
    only then): needs root; kube-apiserver then binds and advertises the node's bridge address
    (:data:`~cogate.localcluster.host.NODE_IP`) instead of 127.0.0.1, so that pods reach it
    through the ``kubernetes`` Service.
    ``audit_policy``: an ``audit.k8s.io/v1`` Policy (as a dict); kube-apiserver then writes its
    audit log (JSON lines, blocking mode) to :attr:`audit_log`.
    ``autoscaler``: None (the default: no autoscaler), an
    :class:`~cogate.localcluster.autoscaler.AutoscalerSpec`, or node groups
    (:class:`~cogate.localcluster.autoscaler.NodeGroup` values, the spec's other defaults):
    also run the real cluster-autoscaler (kwok provider, ProvisioningRequests on), started last
    and stopped first; it needs the ``cluster-autoscaler`` tool built
    (``python -m cogate.localcluster.build cluster-autoscaler``). Its flags can be extended with
    ``extra_args={"cluster-autoscaler": [...]}``.
    ``kubernetes_version``: the Kubernetes release to run (``"1.37.2"``; a key of
    :data:`~cogate.localcluster.versions.RELEASES`, with the etcd and kwok that fit it); default
    ``$COGATE_KUBERNETES_VERSION``, else :data:`~cogate.localcluster.versions.DEFAULT_RELEASE`.
    ``feature_gates``: gates to turn on or off (``{"GenericWorkload": True}`` or
    ``"GenericWorkload=true"``) in kube-apiserver, kube-scheduler and kube-controller-manager, with
    the ``--runtime-config`` an enabled gate needs (:func:`~cogate.localcluster.versions.feature_gate_flags`);
    default ``$COGATE_FEATURE_GATES``, else none. Both raise ``ValueError`` (an unknown release
    lists the supported ones) at construction.
    """

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, keep: bool = False,
                 timeout: float = 60.0, extra_args: Mapping[str, Iterable[str]] | None = None,
                 real_node: bool = False, audit_policy: Mapping[str, Any] | None = None,
                 autoscaler: AutoscalerSpec | Iterable[NodeGroup] | None = None,
                 kubernetes_version: str | None = None,
                 feature_gates: str | Mapping[str, bool] | None = None) -> None:
        #: The Kubernetes release run (:class:`~cogate.localcluster.versions.Release`).
        self.release = versions.release(kubernetes_version)
        #: Feature gates set in the control plane ({name: enabled}).
        self.feature_gates = versions.feature_gates(feature_gates)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir).expanduser().resolve() if workdir is not None else None
        self.keep = keep or os.environ.get("COGATE_KEEP_CLUSTER") == "1"
        self.timeout = float(timeout)
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        if autoscaler is not None and not isinstance(autoscaler, AutoscalerSpec):
            autoscaler = AutoscalerSpec(groups=tuple(autoscaler))
        #: How the autoscaler runs (None: it does not).
        self.autoscaler: AutoscalerSpec | None = autoscaler
        known = COMPONENTS + (NODE_COMPONENTS if real_node else ()) + ((AUTOSCALER,) if autoscaler else ())
        unknown = set(self.extra_args) - set(known)
        if unknown:
            raise ValueError(f"extra_args: unknown component(s) {sorted(unknown)}; expected some of {known}")
        self.real_node = real_node
        self.audit_policy = dict(audit_policy) if audit_policy is not None else None
        #: The real node once started (``real_node=True``), else None.
        self.node: RealNode | None = None
        self.ports: dict[str, int] = {}
        self.procs: dict[str, Proc] = {}
        #: seconds from start() until each component was ready, and "total"
        self.timings: dict[str, float] = {}
        self.detached = False
        self._started = False
        self._atexit_registered = False

    # -- paths ------------------------------------------------------------------
    def _path(self, *parts: str) -> Path:
        if self.workdir is None:
            raise ClusterError("cluster not started: no work dir yet")
        return self.workdir.joinpath(*parts)

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (user ``admin`` in group ``system:masters``, TLS with the cluster CA)."""
        return self._path("kubeconfig")

    @property
    def address(self) -> str:
        """The address kube-apiserver binds and advertises: 127.0.0.1, or the real node's bridge address."""
        return NODE_IP if self.real_node else "127.0.0.1"

    @property
    def server(self) -> str:
        """``https://<address>:<port>`` of kube-apiserver (see :attr:`address`)."""
        return f"https://{self.address}:{self.ports['kube-apiserver']}"

    @property
    def ca_file(self) -> Path:
        """PEM of the cluster CA (signs every serving and client certificate of the cluster)."""
        return self._path("pki", "ca.crt")

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log (JSON lines; written only with ``audit_policy``)."""
        return self._path("audit.log")

    @property
    def state_file(self) -> Path:
        return self._path(STATE_FILE)

    def log_path(self, component: str) -> Path:
        """Log file of ``component`` (one of :data:`COMPONENTS`)."""
        return self._path(f"{component}.log")

    @property
    def pids(self) -> dict[str, int]:
        """Component name -> pid of every process started (alive or not), the real node's included."""
        return {name: p.pid for name, p in self._all_procs().items()}

    def _all_procs(self) -> dict[str, Proc]:
        return {**self.procs, **(self.node.procs if self.node else {})}

    # -- lifecycle --------------------------------------------------------------
    def __enter__(self) -> "LocalCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, detach: bool = False) -> Path:
        """Start every component and wait until ready; returns the state file path.

        ``detach=True``: the processes outlive this Python process (no atexit stop); find them
        again with :meth:`stop_from_state` / :meth:`read_state`. Raises :class:`ClusterError`
        (after stopping anything started) when a binary is missing or a component fails.
        """
        if self._started:
            raise ClusterError("cluster already started")
        tools = (versions.CONTROL_PLANE_TOOLS + (versions.NODE_TOOLS if self.real_node else ())
                 + (versions.AUTOSCALER_TOOLS if self.autoscaler else ()))
        missing = [n for tool in tools for n in versions.BINARIES[tool] if not self._binary(n).is_file()]
        if missing:
            raise ClusterError(f"binaries not built: {missing}; run `python -m cogate.localcluster.build "
                               f"--kubernetes-version {self.release.kubernetes.lstrip('v')}`")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="cogate-cluster-"))
        else:
            if self.workdir.exists() and any(self.workdir.iterdir()):
                raise ClusterError(f"workdir {self.workdir} is not empty (a cluster may be running there; "
                                   f"stop it with LocalCluster.stop_from_state)")
            self.workdir.mkdir(parents=True, exist_ok=True)
        self.detached = detach
        self._started = True
        if not detach and not self._atexit_registered:
            atexit.register(self._atexit_stop)
            self._atexit_registered = True
        t0 = time.monotonic()
        try:
            names = ("etcd", "etcd-peer", "kube-apiserver", "kube-scheduler", "kube-controller-manager",
                     *((AUTOSCALER,) if self.autoscaler else ()))
            self.ports = dict(zip(names, free_ports(len(names))))
            if self.real_node:
                from .host.realnode import RealNode

                self.node = RealNode(self._path("node"), timeout=max(self.timeout, 120.0),
                                     extra_args={k: v for k, v in self.extra_args.items() if k in NODE_COMPONENTS})
                with _real_node_errors():
                    self.node.setup_host(SERVICE_CIDR)
            self._write_pki_and_configs()
            self._start_etcd()
            self._wait_http("etcd", f"http://127.0.0.1:{self.ports['etcd']}/health", lambda b: b'"health":"true"' in b)
            self.timings["etcd"] = time.monotonic() - t0
            self._start_apiserver()
            self._wait_http("kube-apiserver", f"{self.server}/readyz", None)
            self.timings["kube-apiserver"] = time.monotonic() - t0
            self._start_scheduler()
            self._start_controller_manager()
            self._start_kwok()
            self._wait_http("kube-scheduler", f"https://127.0.0.1:{self.ports['kube-scheduler']}/healthz", None)
            self.timings["kube-scheduler"] = time.monotonic() - t0
            self._wait_http("kube-controller-manager",
                            f"https://127.0.0.1:{self.ports['kube-controller-manager']}/healthz", None)
            self.timings["kube-controller-manager"] = time.monotonic() - t0
            self._wait_http("kube-controller-manager",
                            f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", None,
                            what="the default ServiceAccount in namespace default")
            self.timings["default-serviceaccount"] = time.monotonic() - t0
            self._check_alive("kwok")
            if self.autoscaler is not None:
                self._start_autoscaler()
                self.timings[AUTOSCALER] = time.monotonic() - t0
            if self.node is not None:
                self._write_state()  # so that stop_from_state finds a half-started node too
                t1 = time.monotonic()
                with _real_node_errors():
                    self.node.start(self.api_client)
                self.timings["real-node"] = time.monotonic() - t1
            self.timings["total"] = time.monotonic() - t0
            self._write_state()
        except BaseException:
            self._stop_after_failed_start()
            raise
        return self.state_file

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process started (reverse order; SIGTERM, then SIGKILL after ``grace`` s),
        wait until the cluster's ports are closed, remove the work dir unless ``keep``.
        Idempotent. Raises :class:`ClusterError` if a process survives SIGKILL or a port stays open."""
        if not self._started:
            return
        self._started = False
        problems: list[str] = []
        if self.node is not None:
            apiserver = self.procs.get("kube-apiserver")
            problems += self.node.stop(self.kubectl if apiserver is not None and apiserver.alive() else None, grace)
        problems += terminate(list(self.procs.values()), grace)
        problems += wait_ports_closed([p for n, p in self.ports.items() if n != "kube-apiserver"], 10.0)
        if "kube-apiserver" in self.ports:
            problems += wait_ports_closed([self.ports["kube-apiserver"]], 10.0, host=self.address)
        if self.node is not None:
            problems += self.node.teardown_host()
        if self.workdir is not None and not self.keep:
            mounted = [m for m in mounts() if m.startswith(str(self.workdir) + "/")]
            if mounted:  # never delete through a mount point
                problems.append(f"work dir {self.workdir} kept: still mounted below it: {mounted[:5]}")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
                if self._own_workdir:
                    self.workdir = None  # a new start() makes a new one
        if problems:
            raise ClusterError("; ".join(problems))

    def _stop_after_failed_start(self) -> None:
        try:
            self.stop()
        except ClusterError as exc:  # the start error matters more; keep this one in the log
            print(f"cogate.localcluster: stopping after a failed start: {exc}", file=sys.stderr)

    def _atexit_stop(self) -> None:
        if self._started and not self.detached:
            try:
                self.stop()
            except ClusterError:
                pass

    # -- background use ---------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "workdir": str(self.workdir),
            "keep": self.keep,
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "ca_file": str(self.ca_file),
            "ports": self.ports,
            "processes": {n: {"pid": p.pid, "binary": p.binary, "log": str(p.log)} for n, p in self.procs.items()},
            "real_node": self.node.state() if self.node is not None else None,
            "autoscaler": ({"namespace": self.autoscaler.namespace, "groups": [g.name for g in self.autoscaler.groups]}
                           if self.autoscaler is not None else None),
            "timings": self.timings,
            "kubernetes_version": self.release.kubernetes,
            "feature_gates": self.feature_gates,
            "started_at": time.time(),
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        os.replace(tmp, self.state_file)

    @staticmethod
    def read_state(path: str | os.PathLike[str]) -> dict[str, Any]:
        """The JSON state written by :meth:`start`: ``workdir``, ``kubeconfig``, ``server``,
        ``ca_file``, ``ports`` {name: port}, ``processes`` {name: {pid, binary, log}},
        ``timings``, ``started_at`` (epoch s). Raises ``FileNotFoundError`` / ``ValueError``."""
        data = json.loads(Path(path).expanduser().read_text())
        if not isinstance(data, dict) or "processes" not in data or "ports" not in data:
            raise ValueError(f"{path}: not a LocalCluster state file")
        return data

    @classmethod
    def attach(cls, path: str | os.PathLike[str]) -> "LocalCluster":
        """A LocalCluster object for a running (detached) cluster described by state file ``path``;
        ``kubectl``, ``api_client``, ``add_nodes`` and ``stop`` work on it."""
        state = cls.read_state(path)
        self = cls(state["workdir"], keep=bool(state.get("keep")), real_node=bool(state.get("real_node")),
                   kubernetes_version=state.get("kubernetes_version") or versions.DEFAULT_RELEASE,
                   feature_gates=state.get("feature_gates") or {})
        if state.get("real_node"):
            from .host.realnode import RealNode

            self.node = RealNode.from_state(state["real_node"])
        self.ports = {k: int(v) for k, v in state["ports"].items()}
        self.procs = {n: Proc(n, int(p["pid"]), p["binary"], Path(p["log"])) for n, p in state["processes"].items()}
        self.timings = dict(state.get("timings", {}))
        self.detached = True
        self._started = True
        return self

    @classmethod
    def stop_from_state(cls, path: str | os.PathLike[str], *, grace: float = 10.0, keep: bool | None = None) -> None:
        """Stop the detached cluster of state file ``path`` (only pids still running the recorded
        binary are signalled) and remove its work dir unless it was started with ``keep=True``
        (``keep`` overrides). Raises :class:`ClusterError` if something survives."""
        cluster = cls.attach(path)
        if keep is not None:
            cluster.keep = keep
        try:
            cluster.stop(grace)
        finally:
            if cluster.keep:
                Path(path).expanduser().unlink(missing_ok=True)

    # -- using it ---------------------------------------------------------------
    def wait_crds_established(self, names: Sequence[str], timeout: float = 60.0) -> None:
        """:func:`wait_crds_established` with this cluster's kubectl. Raises :class:`ClusterError`."""
        wait_crds_established(self.kubectl, names, timeout)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run the pinned kubectl with the admin kubeconfig; text stdout/stderr captured.

        Raises :class:`ClusterError` with the command and stderr when ``check`` and it fails.
        """
        cmd = [str(self._binary("kubectl")), "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"`kubectl {' '.join(args)}` failed with exit code {proc.returncode}:\n"
                               f"{proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def api_client(self):
        """A new ``kubernetes.client.ApiClient`` authenticated as admin (close it when done)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def add_nodes(self, count: int, **shape: Any) -> list[str]:
        """Create ``count`` kwok nodes (see :func:`cogate.localcluster.nodes.add_nodes`) and wait until Ready."""
        from .nodes import add_nodes

        return add_nodes(self, count, **shape)

    def load_image(self, path: str | os.PathLike[str]) -> list[str]:
        """Import the OCI or Docker image archive ``path`` into the real node's containerd
        (namespace ``k8s.io``, what kubelet sees), as ``ctr -n k8s.io images import`` does; returns
        the image references. Pods on the real node then use it with ``imagePullPolicy: Never``.
        Raises :class:`ClusterError` without a real node or when the import fails."""
        if self.node is None:
            raise ClusterError("load_image needs a real node: LocalCluster(real_node=True)")
        with _real_node_errors(prefix=""):
            return self.node.load_image(path)

    def rss(self) -> dict[str, int]:
        """Resident memory in bytes of each running component (``/proc/<pid>/status`` VmRSS)."""
        return {name: rss_bytes(p.pid) for name, p in self._all_procs().items() if p.alive()}

    # -- internals: files -------------------------------------------------------
    def _write_pki_and_configs(self) -> None:
        pk = self._path("pki")
        ca_cert, ca_key = pki.new_ca("cogate-local-ca", days=365)
        pki.write_pem(pk / "ca.crt", ca_cert)
        pki.write_pem(pk / "ca.key", ca_key)
        cert, key = pki.issue(
            ca_cert, ca_key, "kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local"],
            ip_addresses=["127.0.0.1", self.address, KUBERNETES_SERVICE_IP], days=365)
        pki.write_pem(pk / "apiserver.crt", cert)
        pki.write_pem(pk / "apiserver.key", key)
        for name in ("kube-scheduler", "kube-controller-manager"):
            cert, key = pki.issue(ca_cert, ca_key, name, dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=365)
            pki.write_pem(pk / f"{name}-serving.crt", cert)
            pki.write_pem(pk / f"{name}-serving.key", key)
        sa_key = pki.new_ec_key()
        pki.write_pem(pk / "sa.key", sa_key)
        pki.write_pem(pk / "sa.pub", sa_key.public_key())
        # client identities: (file stem, user, groups)
        clients = [
            ("admin", "admin", ["system:masters"]),
            ("kube-scheduler", "system:kube-scheduler", []),
            ("kube-controller-manager", "system:kube-controller-manager", []),
            # kwok patches node/pod status, renews Leases and deletes pods of every namespace.
            ("kwok", "kwok-controller", ["system:masters"]),
        ]
        if self.autoscaler is not None:
            # Creates and deletes Nodes, reads every pod, writes ProvisioningRequest status.
            clients.append((AUTOSCALER, AUTOSCALER, ["system:masters"]))
        if self.node is not None:
            # kube-apiserver's identity towards kubelet (logs, exec, port-forward).
            clients.append(("apiserver-kubelet", "kube-apiserver-kubelet-client", ["system:masters"]))
        server = self.server
        for stem, user, groups in clients:
            write_kubeconfig(self._path("kubeconfig" if stem == "admin" else f"{stem}.kubeconfig"),
                             server=server, ca_cert=ca_cert, ca_key=ca_key, ca_file=pk / "ca.crt",
                             pki_dir=pk, stem=stem, user=user, groups=groups)
        # kwok: our options and stages (the packaged YAML) as its one --config file
        shutil.copyfile(STAGES_FILE, self._path("kwok.yaml"))
        if self.node is not None:
            with _real_node_errors():
                self.node.write_files(ca_cert=ca_cert, ca_key=ca_key, ca_file=pk / "ca.crt", server=server)

    # -- internals: processes ---------------------------------------------------
    def _binary(self, name: str) -> Path:
        """The cached binary ``name`` of this cluster's release (:func:`build.binary`)."""
        return build.binary(name, self.release.kubernetes)

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> None:
        gates = versions.feature_gate_flags(self.release, self.feature_gates).get(name, [])
        argv = [str(self._binary(name)), *args, *gates, *self.extra_args.get(name, [])]
        self.procs[name] = spawn(name, argv, self.log_path(name), cwd=self.workdir, env=env)

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn("etcd", [
            "--name=cogate", f"--data-dir={self._path('etcd')}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=cogate={peer}", "--initial-cluster-state=new",
            "--unsafe-no-fsync", "--log-level=warn", "--quota-backend-bytes=2147483648",
        ])

    def _start_apiserver(self) -> None:
        pk = self._path("pki")
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            f"--bind-address={self.address}", f"--advertise-address={self.address}",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--cert-dir={pk}",
            f"--tls-cert-file={pk / 'apiserver.crt'}", f"--tls-private-key-file={pk / 'apiserver.key'}",
            f"--client-ca-file={pk / 'ca.crt'}",
            # Request-header (front-proxy) auth: only a client cert named front-proxy-client, which
            # no component holds, may assert X-Remote-User. Set so that the scheduler's and the
            # controller-manager's delegated authentication find a complete configmap.
            f"--requestheader-client-ca-file={pk / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pk / 'sa.pub'}",
            f"--service-account-signing-key-file={pk / 'sa.key'}",
            *self._audit_flags(),
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *(self.release.loopback_flags if not self.real_node else ()),
            *([f"--kubelet-client-certificate={pk / 'apiserver-kubelet-client.crt'}",
               f"--kubelet-client-key={pk / 'apiserver-kubelet-client.key'}",
               f"--kubelet-certificate-authority={pk / 'ca.crt'}",
               "--kubelet-preferred-address-types=InternalIP"] if self.node is not None else []),
        ])

    def _audit_flags(self) -> list[str]:
        if self.audit_policy is None:
            return []
        policy = self._path("audit-policy.yaml")
        policy.write_text(yaml.safe_dump(self.audit_policy))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-mode=blocking", "--audit-log-maxbackup=0"]

    def _component_common(self, name: str) -> list[str]:
        pk = self._path("pki")
        kc = self._path(f"{name}.kubeconfig")
        return [
            f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports[name]}",
            f"--tls-cert-file={pk / f'{name}-serving.crt'}", f"--tls-private-key-file={pk / f'{name}-serving.key'}",
            "--leader-elect=false", "--profiling=false", "--v=1",
        ]

    def _start_scheduler(self, *extra: str) -> None:
        self._spawn("kube-scheduler", [*self._component_common("kube-scheduler"), *extra])

    def restart_scheduler(self, *extra: str, grace: float = 10.0) -> None:
        """Stop kube-scheduler (SIGTERM, SIGKILL after ``grace`` s) and start it again, with
        ``extra`` flags after its usual ones (a later flag wins: ``--leader-elect=true`` turns its
        leader election on), and wait until it is healthy: what a kube-scheduler restart or
        failover looks like to the rest of the cluster (a new process lists every pod again).
        Its log is appended to. Raises :class:`ClusterError` when it does not come back."""
        if not self._started:
            raise ClusterError("cluster not started")
        proc = self.procs.pop("kube-scheduler", None)
        problems = terminate([proc], grace) if proc is not None else []
        if problems:
            raise ClusterError("; ".join(problems))
        self._start_scheduler(*extra)
        self._wait_http("kube-scheduler", f"https://127.0.0.1:{self.ports['kube-scheduler']}/healthz", None)
        self._write_state()

    def restart_component(self, name: str, grace: float = 10.0) -> None:
        """Stop ``name`` (``kube-apiserver``, ``kube-scheduler`` or ``kube-controller-manager``; SIGTERM,
        SIGKILL after ``grace`` s) and start it again with its usual flags on the same port, waiting
        until it is healthy: a restart as the chaos soak (bench/soak.py) injects it. Raises
        :class:`ClusterError` for another name or when it does not come back."""
        starts = {"kube-apiserver": (self._start_apiserver, f"{self.server}/readyz"),
                  "kube-scheduler": (self._start_scheduler,
                                     f"https://127.0.0.1:{self.ports.get('kube-scheduler')}/healthz"),
                  "kube-controller-manager": (self._start_controller_manager,
                                              f"https://127.0.0.1:{self.ports.get('kube-controller-manager')}/healthz")}
        if not self._started or name not in starts:
            raise ClusterError(f"restart_component: cannot restart {name!r} (expected one of {sorted(starts)})")
        proc = self.procs.pop(name, None)
        problems = terminate([proc], grace) if proc is not None else []
        if problems:
            raise ClusterError("; ".join(problems))
        start, url = starts[name]
        start()
        self._wait_http(name, url, None)
        self._write_state()

    def _start_controller_manager(self) -> None:
        pk = self._path("pki")
        self._spawn("kube-controller-manager", [
            *self._component_common("kube-controller-manager"),
            # the cloud-provider controllers off explicitly (no-ops without a provider; gone in 1.37)
            "--controllers=" + ",".join(("*", *(f"-{c}" for c in self.release.cloud_controllers))),
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pk / 'sa.key'}",
            f"--root-ca-file={pk / 'ca.crt'}",
            f"--cluster-signing-cert-file={pk / 'ca.crt'}", f"--cluster-signing-key-file={pk / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allocate-node-cidrs=false",
            # Start-up creates a ServiceAccount and token per controller; the default client
            # rate limit (20 qps) makes that take seconds on a local cluster.
            "--kube-api-qps=200", "--kube-api-burst=400",
        ])

    def _start_kwok(self) -> None:
        self._spawn("kwok", [
            f"--kubeconfig={self._path('kwok.kubeconfig')}",
            f"--config={self._path('kwok.yaml')}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ])

    def _start_autoscaler(self) -> None:
        """The ProvisioningRequest CRD, the kwok provider's ConfigMaps, then the process; ready
        when ``/health-check`` answers 200 (it does from the start, so this only proves the
        process is up and serving; its first loop follows within ``scan_interval``)."""
        from . import autoscaler

        spec = self.autoscaler
        assert spec is not None
        try:
            autoscaler.prepare(self, spec, self.workdir)
        except build.MissingSource as exc:
            raise ClusterError(f"{AUTOSCALER}: {exc}") from None
        self._spawn_autoscaler()

    def _spawn_autoscaler(self) -> None:
        from . import autoscaler

        spec = self.autoscaler
        assert spec is not None
        kubeconfig = self._path(f"{AUTOSCALER}.kubeconfig")
        argv = autoscaler.command_line(build.binary(AUTOSCALER), kubeconfig, spec, self.ports[AUTOSCALER])
        self._spawn(AUTOSCALER, argv[1:], env=autoscaler.environment(os.environ, kubeconfig, spec.namespace))
        wait_http(self.procs[AUTOSCALER], f"http://127.0.0.1:{self.ports[AUTOSCALER]}/health-check",
                  timeout=self.timeout, error=ClusterError)

    def restart_autoscaler(self, grace: float = 10.0) -> None:
        """Stop the autoscaler and start it again, with nothing remembered: on SIGTERM it deletes its
        status ConfigMap and every Node of its groups (the kwok provider's ``Cleanup``); the new
        process has no cached node templates, no back-off of earlier failed scale-ups or
        ProvisioningRequests and no "unregistered" nodes (nodes deleted behind its back stay
        unregistered instances in its cache for up to 2 min,
        ``CloudProviderNodeInstancesCacheRefreshInterval``). Raises :class:`ClusterError` without
        an autoscaler or when it does not come back."""
        if self.autoscaler is None or AUTOSCALER not in self.procs:
            raise ClusterError("restart_autoscaler: this cluster runs no autoscaler (LocalCluster(autoscaler=...))")
        problems = terminate([self.procs.pop(AUTOSCALER)], grace)
        if problems:
            raise ClusterError("; ".join(problems))
        self._spawn_autoscaler()
        if self.state_file.exists():
            self._write_state()

    # -- internals: readiness ---------------------------------------------------
    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        pk = self._path("pki")
        ctx.load_cert_chain(pk / "admin-client.crt", pk / "admin-client.key")
        return ctx

    def _check_alive(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is None or not proc.alive():
            code = proc.returncode if proc else None
            raise ClusterError(f"{name} exited (code {code}); last lines of {self.log_path(name)}:\n"
                               f"{tail(self.log_path(name))}")

    def _wait_http(self, name: str, url: str, ok, what: str | None = None) -> None:
        ctx = self._ssl_context() if url.startswith("https") else None
        wait_http(self.procs[name], url, timeout=self.timeout, context=ctx, ok=ok, what=what, error=ClusterError)
