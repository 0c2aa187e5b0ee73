"""cogate running against a :class:`~cogate.localcluster.cluster.LocalCluster`.

:class:`CogateStack` applies the PodGroup CRD, starts the webhook and the
controller as real processes (``python -m cogate.cli webhook|controller``), and
registers the webhook with a MutatingWebhookConfiguration pointing at the local
HTTPS URL (``clientConfig.url``, CA bundle from a CA made for this run). Used by
``cogate demo``, ``cogate dev up`` and the end-to-end tests.

Processes log to ``<workdir>/webhook.log`` and ``<workdir>/controller.log``;
:class:`StackError` carries the log tail when one does not come up.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cogate.api import DEFAULT_ADOPTED_SCHEDULER_NAMES, DEFAULT_GATE_NAME
from cogate.certs import pki
from cogate.webhook.config import webhook_configuration

from .cluster import wait_crds_established
from .procs import Proc, free_port, spawn, wait_http

#: The one CRD file (the chart's); the installed package carries a copy.
CRD_NAME = "podgroups.scheduling.x-k8s.io"


def crd_path() -> Path:
    """Path of the PodGroup CRD manifest: the chart's file in a checkout, else the packaged copy."""
    repo = Path(__file__).resolve().parents[1] / "charts" / "cogate" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
    if repo.is_file():
        return repo
    import cogate

    return Path(cogate.__file__).parent / "manifests" / "scheduling.x-k8s.io_podgroups.yaml"


class StackError(RuntimeError):
    """A cogate process did not come up; the message has its log tail."""


@dataclass
class CogateStack:
    """Webhook + controller processes for a running local cluster.

    ``cluster`` needs ``kubeconfig`` (path) and ``kubectl(*args, check=True)``.
    ``controller_args`` are appended to ``cogate controller``'s command line.
    ``adopt_scheduler_names``: the webhook's ``--adopt-scheduler-name`` values; by default the
    chart's (``webhook.adoptSchedulerNames``), so a local cluster admits pods as an install does;
    ``()`` turns adoption off.
    """

    cluster: Any
    workdir: Path
    gate_name: str = DEFAULT_GATE_NAME
    controller_args: tuple[str, ...] = ()
    adopt_scheduler_names: tuple[str, ...] = DEFAULT_ADOPTED_SCHEDULER_NAMES
    processes: dict[str, Proc] = field(default_factory=dict)
    webhook_port: int = 0
    webhook_metrics_port: int = 0
    controller_metrics_port: int = 0

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> "CogateStack":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.apply_crd()
        ca_pem = self._write_certs()
        self.start_webhook()
        self.register_webhook(ca_pem)
        self.start_controller()
        return self

    def stop(self) -> None:
        for name in ("controller", "webhook"):
            proc = self.processes.pop(name, None)
            if proc:
                proc.stop()

    def __enter__(self) -> "CogateStack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- pieces ------------------------------------------------------------
    def apply_crd(self) -> None:
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_path()))
        wait_crds_established(self.cluster.kubectl, [CRD_NAME])

    def _write_certs(self) -> bytes:
        ca_cert, ca_key = pki.new_ca("cogate-local-webhook-ca")
        cert, key = pki.issue(ca_cert, ca_key, "cogate-webhook", dns_names=("localhost",),
                              ip_addresses=("127.0.0.1",), server=True)
        pki.write_pem(self.workdir / "webhook.crt", cert)
        pki.write_pem(self.workdir / "webhook.key", key)
        pki.write_pem(self.workdir / "ca.crt", ca_cert)
        return (self.workdir / "ca.crt").read_bytes()

    def _spawn(self, name: str, args: list[str]) -> Proc:
        proc = spawn(name, [sys.executable, "-m", "cogate.cli", name, *args], self.workdir / f"{name}.log",
                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.processes[name] = proc
        return proc

    def _wait_ready(self, proc: Proc, url: str, context: ssl.SSLContext | None, timeout: float = 30.0) -> None:
        wait_http(proc, url, timeout=timeout, context=context, error=StackError)

    def start_webhook(self) -> None:
        self.webhook_port = free_port()
        self.webhook_metrics_port = free_port()
        proc = self._spawn("webhook", [
            "--host", "127.0.0.1", "--port", str(self.webhook_port),
            "--tls-cert-file", str(self.workdir / "webhook.crt"),
            "--tls-key-file", str(self.workdir / "webhook.key"),
            "--gate-name", self.gate_name, "--metrics-port", str(self.webhook_metrics_port),
            *(arg for name in self.adopt_scheduler_names for arg in ("--adopt-scheduler-name", name)),
        ])
        ctx = ssl.create_default_context(cafile=str(self.workdir / "ca.crt"))
        self._wait_ready(proc, f"https://127.0.0.1:{self.webhook_port}/readyz", ctx)

    def register_webhook(self, ca_pem: bytes) -> None:
        config = webhook_configuration({
            "url": f"https://127.0.0.1:{self.webhook_port}/mutate",
            "caBundle": base64.b64encode(ca_pem).decode(),
        }, gate_name=self.gate_name)
        path = self.workdir / "webhook-configuration.yaml"
        path.write_text(yaml.safe_dump(config))
        self.cluster.kubectl("apply", "-f", str(path))

    def start_controller(self) -> None:
        self.controller_metrics_port = free_port()
        proc = self._spawn("controller", [
            "--kubeconfig", str(self.cluster.kubeconfig), "--no-leader-elect",
            "--gate-name", self.gate_name, "--metrics-port", str(self.controller_metrics_port),
            *self.controller_args,
        ])
        self._wait_ready(proc, f"http://127.0.0.1:{self.controller_metrics_port}/readyz", None)

    def restart_controller(self, *extra: str) -> None:
        """Stop and start the controller (e.g. to test that a restart finishes a release)."""
        proc = self.processes.pop("controller", None)
        if proc:
            proc.stop()
        if extra:
            self.controller_args = tuple(extra)
        self.start_controller()

    def metrics(self, component: str = "controller") -> str:
        port = self.controller_metrics_port if component == "controller" else self.webhook_metrics_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    def state(self) -> dict[str, Any]:
        """What ``cogate dev up`` persists to find the processes again."""
        return {name: {"pid": p.pid, "binary": p.binary, "log": str(p.log)} for name, p in self.processes.items()} | {
            "webhook_port": self.webhook_port, "controller_metrics_port": self.controller_metrics_port}


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
