"""The chaos soak's processes and fault injector (issue 35).

:class:`Supervisor` runs cogate's processes as Kubernetes would: two controller replicas with
leader election on (``controller-a``, ``controller-b``; their kubeconfig points at the faulty
proxy, :mod:`soak_proxy`) and the webhook (fixed port, the registration's URL), each restarted
1 s after it exits (a replica that loses the Lease exits by design) unless held down by a fault.

:class:`Injector` draws faults from a ``random.Random`` seeded by the soak, one at a time with
exponential gaps (mean ``gap`` seconds), and logs each as a :class:`~soak_invariants.Fault`
(kind, detail, duration); two injectors with their own seeds run side by side (processes; network
and nodes) so faults overlap. Kinds (:data:`PROCESS_FAULTS`, :data:`OTHER_FAULTS`) and what each does:

- ``sigkill-controller`` / ``sigkill-webhook``: SIGKILL, restarted 1-3 s later;
- ``sigstop-controller`` / ``sigstop-webhook``: SIGSTOP for 3-20 s (webhook 3-8 s), then SIGCONT;
- ``restart-kube-apiserver`` / ``restart-kube-scheduler`` / ``restart-kube-controller-manager``:
  SIGTERM and a new process (:meth:`LocalCluster.restart_component`);
- ``cert-rotation``: a new CA and serving pair for the webhook; the registration trusts both CAs
  while the webhook reloads its files, then only the new one (as the chart's rotator does);
- ``proxy-drop``: every controller connection cut; ``proxy-stall``: half-open for 5-20 s;
  ``proxy-latency``: +0.2-1 s a request for 10-30 s; ``proxy-errors``: 20-50 % of requests answered
  429/500/503 for 10-30 s;
- ``node-delete``: a random node deleted, an identical one created 10-30 s later;
  ``node-cordon``: cordoned for 10-30 s.

After each fault ends the injector times recovery with a canary gang (2 pods of 10m CPU, priority
``soak-canary``): from the fault's start until both are bound (``recoveries``).
"""

from __future__ import annotations

import base64
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from cogate.certs import pki
from cogate.localcluster import nodes as fake_nodes
from cogate.localcluster.procs import Proc, free_port, spawn, wait_http
from cogate.webhook.config import webhook_configuration

from soak_invariants import Fault
from soak_workloads import create, pod_template

PROCESS_FAULTS = ("sigkill-controller", "sigstop-controller", "sigkill-webhook", "sigstop-webhook",
                  "restart-kube-apiserver", "restart-kube-scheduler", "restart-kube-controller-manager",
                  "cert-rotation")
OTHER_FAULTS = ("proxy-drop", "proxy-stall", "proxy-latency", "proxy-errors", "node-delete", "node-cordon")
CONTROLLERS = ("controller-a", "controller-b")


def _retry(call: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``call()`` again every second while kube-apiserver cannot be reached (another fault may be
    restarting it) or answers 5xx/429, up to ``seconds``; a fault must always be undone."""
    deadline = time.monotonic() + seconds
    retried = False
    while True:
        try:
            return call()
        except client.ApiException as exc:
            if exc.status in (404, 409) and retried:
                return None  # a retried create or delete whose first try went through
            if exc.status not in (429, 500, 502, 503, 504) or time.monotonic() > deadline:
                raise
        except Exception:  # noqa: BLE001 - connection refused while kube-apiserver restarts
            if time.monotonic() > deadline:
                raise
        retried = True
        time.sleep(1.0)


class Supervisor:
    """cogate's processes (module doc) for ``cluster``, logs and certificates in ``workdir``."""

    def __init__(self, cluster: Any, workdir: Path, gate: str, proxy_kubeconfig: Path,
                 provisioning_class: str = "") -> None:
        self.cluster, self.workdir, self.gate, self.kubeconfig = cluster, workdir, gate, proxy_kubeconfig
        self.provisioning_class = provisioning_class
        self.webhook_port = free_port()
        self.procs: dict[str, Proc] = {}
        self.metrics_ports = {name: free_port() for name in (*CONTROLLERS, "webhook")}
        self.held: set[str] = set()
        self.restarts: dict[str, int] = {name: 0 for name in self.metrics_ports}
        self.ca_pems: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-supervisor", daemon=True)

    def argv(self, name: str) -> list[str]:
        if name == "webhook":
            return ["webhook", "--host", "127.0.0.1", "--port", str(self.webhook_port),
                    "--tls-cert-file", str(self.workdir / "webhook.crt"), "--tls-key-file", str(self.workdir / "webhook.key"),
                    "--tls-reload-interval", "1", "--gate-name", self.gate,
                    "--metrics-port", str(self.metrics_ports[name])]
        return ["controller", "--kubeconfig", str(self.kubeconfig), "--leader-elect",
                "--leader-election-namespace", "default", "--gate-name", self.gate,
                "--metrics-port", str(self.metrics_ports[name]),
                *(["--provisioning-class", self.provisioning_class] if self.provisioning_class else [])]

    def spawn(self, name: str) -> Proc:
        proc = spawn(name, [sys.executable, "-m", "cogate.cli", *self.argv(name)], self.workdir / f"{name}.log",
                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.procs[name] = proc
        return proc

    def new_certs(self) -> bytes:
        """A new CA and serving pair (files replaced whole); returns the CA's PEM."""
        ca_cert, ca_key = pki.new_ca(f"cogate-soak-ca-{len(self.ca_pems)}")
        cert, key = pki.issue(ca_cert, ca_key, "cogate-webhook", dns_names=("localhost",),
                              ip_addresses=("127.0.0.1",), server=True)
        for name, obj in (("webhook.key", key), ("webhook.crt", cert)):
            tmp = self.workdir / f".{name}.tmp"
            pki.write_pem(tmp, obj)
            os.replace(tmp, self.workdir / name)
        pki.write_pem(self.workdir / "ca.crt", ca_cert)
        pem = (self.workdir / "ca.crt").read_bytes()
        self.ca_pems.append(pem)
        return pem

    def register(self, *cas: bytes) -> None:
        config = webhook_configuration({"url": f"https://127.0.0.1:{self.webhook_port}/mutate",
                                        "caBundle": base64.b64encode(b"".join(cas)).decode()}, gate_name=self.gate)
        path = self.workdir / "webhook-configuration.yaml"
        import yaml

        path.write_text(yaml.safe_dump(config))
        self.cluster.kubectl("apply", "-f", str(path))

    def start(self) -> "Supervisor":
        pem = self.new_certs()
        import ssl

        self.spawn("webhook")
        wait_http(self.procs["webhook"], f"https://127.0.0.1:{self.webhook_port}/readyz", timeout=60,
                  context=ssl.create_default_context(cafile=str(self.workdir / "ca.crt")))
        self.register(pem)
        for name in CONTROLLERS:
            self.spawn(name)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for proc in self.procs.values():
            proc.signal(signal.SIGCONT)
            proc.stop(5)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                for name, proc in list(self.procs.items()):
                    if name not in self.held and not proc.alive():
                        self.restarts[name] += 1
                        self.spawn(name)

    def kill(self, name: str, down: float) -> None:
        with self._lock:
            self.held.add(name)
            self.procs[name].signal(signal.SIGKILL)
        time.sleep(down)
        with self._lock:
            self.held.discard(name)

    def pause(self, name: str, seconds: float) -> None:
        self.procs[name].signal(signal.SIGSTOP)
        time.sleep(seconds)
        self.procs[name].signal(signal.SIGCONT)

    def rotate(self, overlap: float) -> None:
        old = self.ca_pems[-1]
        ca_cert, ca_key = pki.new_ca(f"cogate-soak-ca-{len(self.ca_pems)}")
        pki.write_pem(self.workdir / "ca-next.crt", ca_cert)
        new = (self.workdir / "ca-next.crt").read_bytes()
        self.register(old, new)
        time.sleep(2)  # the API server takes the new bundle before the webhook serves the new pair
        cert, key = pki.issue(ca_cert, ca_key, "cogate-webhook", dns_names=("localhost",),
                              ip_addresses=("127.0.0.1",), server=True)
        for fname, obj in (("webhook.key", key), ("webhook.crt", cert)):
            tmp = self.workdir / f".{fname}.tmp"
            pki.write_pem(tmp, obj)
            os.replace(tmp, self.workdir / fname)
        self.ca_pems.append(new)
        time.sleep(overlap)
        self.register(new)


class Injector:
    """Seeded faults of ``kinds`` (module doc), logged into ``log`` (a list, appended under ``lock``)."""

    def __init__(self, name: str, kinds: tuple[str, ...], seed: int, gap: float, clock: Callable[[], float],
                 apply: Callable[[str, random.Random], tuple[str, float]], canary: Callable[[float], float | None],
                 log: list, lock: threading.Lock) -> None:
        self.name, self.kinds, self.gap, self.clock = name, kinds, gap, clock
        self.rng = random.Random(f"{name}-{seed}")
        self.apply, self.canary, self.log, self.lock = apply, canary, log, lock
        self.recoveries: list[tuple[str, float | None]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"soak-{name}", daemon=True)

    def start(self) -> "Injector":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(300)

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.expovariate(1.0 / self.gap)):
            kind = self.rng.choice(self.kinds)
            t0 = self.clock()
            with self.lock:  # begun: a check while it lasts knows (soak_invariants.Fault, seconds -1)
                self.log.append(Fault(t0, kind, "", -1.0))
            try:
                detail, _ = self.apply(kind, self.rng)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be applied is logged, not fatal
                self.errors.append(f"t={t0:.1f} {kind}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            with self.lock:
                self.log.append(Fault(t0, kind, detail, self.clock() - t0))
            recovered = self.canary(t0)
            if recovered is not None or not self._stop.is_set():  # a canary cut short by the end is no result
                self.recoveries.append((kind, recovered))


class Chaos:
    """What each fault kind does, against ``cluster``, the :class:`Supervisor` and the proxy."""

    def __init__(self, cluster: Any, sup: Supervisor, proxy: Any, api: client.ApiClient, node_shape: dict[str, Any],
                 clock: Callable[[], float]) -> None:
        self.cluster, self.sup, self.proxy, self.api, self.shape, self.clock = cluster, sup, proxy, api, node_shape, clock
        self._canaries = 0
        self._canary_lock = threading.Lock()
        #: set when the soak stops its injectors: a canary still waiting gives up
        self.stopping = threading.Event()

    def apply(self, kind: str, rng: random.Random) -> tuple[str, float]:
        if kind.startswith("sigkill-") or kind.startswith("sigstop-"):
            who = rng.choice(CONTROLLERS) if kind.endswith("controller") else "webhook"
            if kind.startswith("sigkill-"):
                down = rng.uniform(1, 3)
                self.sup.kill(who, down)
                return f"{who} down {down:.1f} s", down
            secs = rng.uniform(3, 20 if who != "webhook" else 8)
            self.sup.pause(who, secs)
            return f"{who} stopped {secs:.1f} s", secs
        if kind.startswith("restart-"):
            self.cluster.restart_component(kind[len("restart-"):])
            return kind[len("restart-"):], 0.0
        if kind == "cert-rotation":
            self.sup.rotate(overlap=8.0)
            return f"CA #{len(self.sup.ca_pems) - 1}", 10.0
        if kind == "proxy-drop":
            return f"{self.proxy.drop()} connections cut", 0.0
        secs = rng.uniform(5, 20) if kind == "proxy-stall" else rng.uniform(10, 30)
        if kind == "proxy-stall":
            self.proxy.stall()
            time.sleep(secs)
            self.proxy.resume()
            return f"stalled {secs:.1f} s", secs
        if kind == "proxy-latency":
            lat = rng.uniform(0.2, 1.0)
            self.proxy.set_latency(lat)
            time.sleep(secs)
            self.proxy.set_latency(0)
            return f"+{lat:.2f} s a request for {secs:.1f} s", secs
        if kind == "proxy-errors":
            rate = rng.uniform(0.2, 0.5)
            self.proxy.set_errors(rate)
            time.sleep(secs)
            self.proxy.set_errors(0)
            return f"{rate:.0%} errors for {secs:.1f} s", secs
        return self._node_fault(kind, rng, secs)

    def _node_fault(self, kind: str, rng: random.Random, secs: float) -> tuple[str, float]:
        core = client.CoreV1Api(self.api)
        names = sorted(n.metadata.name for n in
                       _retry(lambda: core.list_node(label_selector="cogate-soak=node")).items)
        if not names:
            return "no node", 0.0
        name = rng.choice(names)
        if kind == "node-cordon":
            _retry(lambda: core.patch_node(name, {"spec": {"unschedulable": True}}))
            time.sleep(secs)
            _retry(lambda: core.patch_node(name, {"spec": {"unschedulable": False}}))
            return f"{name} cordoned {secs:.1f} s", secs
        _retry(lambda: core.delete_node(name))
        time.sleep(secs)
        _retry(lambda: core.create_node(fake_nodes.node_manifest(name, **self.shape), _preload_content=False))
        return f"{name} deleted, back after {secs:.1f} s", secs

    def canary(self, t0: float, timeout: float = 180.0) -> float | None:
        """Seconds from ``t0`` until a new 2-pod canary gang is bound (None: not within ``timeout``)."""
        with self._canary_lock:
            self._canaries += 1
            name = f"canary-{self._canaries}"
        ns = "soak-canary"
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name},
                "spec": {"minMember": 2}}
        core = client.CoreV1Api(self.api)
        try:
            # retried: the fault may still hold kube-apiserver or the webhook (failurePolicy Fail) down
            _retry(lambda: create(self.api, ns, body), timeout)
            for i in range(2):
                pod = pod_template(name, name, "10m", "soak-canary")
                pod["metadata"]["name"] = f"{name}-{i}"
                _retry(lambda pod=pod: core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", **pod},
                                                                  _preload_content=False), timeout)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                pods = core.list_namespaced_pod(ns, label_selector=f"soak={name}").items
                if len(pods) == 2 and all(p.spec.node_name for p in pods):
                    return self.clock() - t0
                if self.stopping.wait(0.5):
                    return None
            return None
        except Exception:  # noqa: BLE001 - not created within the timeout: not recovered
            return None
        finally:
            for i in range(2):
                try:
                    core.delete_namespaced_pod(f"{name}-{i}", ns, grace_period_seconds=0)
                except client.ApiException:
                    pass
            try:
                client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
                    "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", name)
            except client.ApiException:
                pass
