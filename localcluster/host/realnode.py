"""A real kubelet node beside the kwok nodes: containerd, runc, CNI, kubelet and kube-proxy on this host.

:class:`RealNode` is started and stopped by :class:`cogate.localcluster.cluster.LocalCluster`
(``LocalCluster(real_node=True)``, ``cogate dev up --real-node``); it is not used on its own.

What runs, and from where:

========================  ==================================================================
containerd 2.x            built from ``github.com/containerd/containerd/v2`` (``versions.py``),
                          with ``containerd-shim-runc-v2`` and ``ctr``; root, state, sockets in
                          ``<workdir>/node/containerd``; sandbox image :func:`pauseimage.pause_ref`
runc, CNI plugins         Debian's ``runc`` and ``containernetworking-plugins`` (``bridge``,
                          ``host-local``, ``loopback``, ``portmap`` in ``/usr/lib/cni``),
                          installed with apt-get when missing (:func:`ensure_host_packages`)
kubelet, kube-proxy       built from the control plane's ``k8s.io/kubernetes`` release
                          (tool ``kubernetes-node``); kube-proxy in ``iptables`` mode
========================  ==================================================================

Network: a bridge :data:`BRIDGE` with :data:`NODE_IP` (the node's InternalIP and the
address kube-apiserver binds and advertises, so that the ``kubernetes`` Service's endpoint
is reachable from pods) and pod subnet :data:`POD_SUBNET` (host-local IPAM); a route for
the Service range through the bridge, so that host processes (kube-apiserver calling a
webhook) reach ClusterIPs through kube-proxy's rules whatever the host's default route.
A firewall chain :data:`FIREWALL_CHAIN` drops traffic to the pod subnet that does not come
from this host or its pods: everything stays reachable from 127.0.0.1's host only, like the
rest of the local control plane.

How kube-apiserver reaches a webhook Service on the node: through kube-proxy's rules on the
host (the node runs kube-proxy; its ``OUTPUT`` rules translate the ClusterIP), not with
``--enable-aggregator-routing``. That is the path of a kubeadm cluster, whose API server host
runs kube-proxy, and keeps the API server's flags the same with and without a real node.

Cgroups: the cgroupfs driver on both sides (kubelet, runc); on a cgroup v1 host kubelet runs
with ``failCgroupV1: false``. Pods live under the cgroup root :data:`CGROUP_ROOT`.

Host state changed while the node runs, and restored by :meth:`RealNode.teardown_host`:
the bridge and its route, the firewall chain, kube-proxy's chains (``kube-proxy --cleanup``),
the kernel settings kubelet sets (:data:`KUBELET_SYSCTLS`), the cgroup root, mounts under the
work dir (overlay rootfs, netns, tmpfs volumes), shim sockets in ``/run/containerd/s``.
Only one real node can run on a host at a time (the bridge name and kube-proxy's chains are
host-wide); a second start fails with :class:`NodeSetupError` naming the owner, and a start
after a crash removes the leftovers of the dead owner first (:func:`recover_host`, also called by
the tests' ``real_cluster`` fixture and ``cogate dev down``).

The node is named :data:`NODE_NAME`, labelled :data:`NODE_LABEL` and tainted :data:`NODE_TAINT`
(NoSchedule): only system components that tolerate it run there; kwok nodes keep the workloads.
There is no cluster DNS: pods use the host's ``/etc/resolv.conf``; clients in pods find the
API server through ``KUBERNETES_SERVICE_HOST``/``_PORT`` as in-cluster configuration does.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from cogate.certs import pki

from .. import build, versions
from ..kubeconfig import write_client as write_kubeconfig
from ..nodes import NodeError, wait_nodes_ready
from ..procs import Proc, cmdline, free_ports, mounts, process_alive, spawn, tail, terminate, wait_http
from . import NODE_COMPONENTS, NODE_IP, NODE_LABEL, NODE_NAME, NODE_TAINT, debian, pauseimage

__all__ = [
    "RealNode",
    "NodeSetupError",
    "NODE_NAME",
    "NODE_IP",
    "POD_SUBNET",
    "BRIDGE",
    "NODE_LABEL",
    "NODE_TAINT",
    "NODE_COMPONENTS",
    "ensure_host_packages",
    "host_leftovers",
    "read_owner",
    "live_owner_pids",
    "owner_alive",
    "recover_host",
]

#: The node's bridge; its address is :data:`NODE_IP`, the pods' gateway.
BRIDGE = "cogate0"
#: Pod addresses (host-local IPAM); :data:`NODE_IP` is its first address.
POD_SUBNET = "10.244.0.0/24"
#: iptables filter chain (jumped to from INPUT for the pod subnet) that keeps the node's
#: addresses reachable from this host and its pods only.
FIREWALL_CHAIN = "COGATE-REAL-NODE"
#: kubelet's cgroup root (``cgroupRoot``); pods live in ``<hierarchy>/cogate/kubepods``.
CGROUP_ROOT = "cogate"
#: Who runs the real node on this host (JSON: workdir, pid of the starting process, sysctls to restore).
OWNER_FILE = Path("/run/cogate-real-node.json")
#: Kernel settings kubelet sets at start unless ``protectKernelDefaults`` (kubelet's
#: ``setupKernelTunables``); their values are saved before and restored after the node runs.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
CNI_BIN_DIR = Path("/usr/lib/cni")
#: Name of the node's CNI network (``10-cogate.conflist``).
CNI_NETWORK = "cogate-real-node"
RUNC = Path("/usr/sbin/runc")
SHIM_SOCKET_DIR = Path("/run/containerd/s")
#: containerd's sockets: a short fixed path (a unix socket path has at most 104-108 bytes, and
#: work dirs can be long); fixed because one real node runs per host.
SOCKET_DIR = Path("/run/cogate-real-node")
#: Paths kubelet and CNI use whatever their configuration says: kubelet's device-plugin socket
#: (``pluginapi.KubeletSocket``) and libcni's result cache (``/var/lib/cni/results``, files named
#: ``<network>-<container id>-<interface>``). Removed (the directories only when empty) on teardown.
KUBELET_DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
CNI_CACHE_DIR = Path("/var/lib/cni/results")


class NodeSetupError(RuntimeError):
    """The real node could not be set up, started or removed; the message says what and how to fix it."""


# ------------------------------------------------------------------ host tools

def _run(cmd: list[str], check: bool = True, timeout: float = 60.0, env: dict[str, str] | None = None,
         input: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, input=input)
    if check and proc.returncode != 0:
        raise NodeSetupError(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}: "
                             f"{(proc.stderr or proc.stdout).strip()}")
    return proc


def ensure_host_packages(log=sys.stderr) -> list[str]:
    """Install the Debian packages of :data:`versions.NODE_PACKAGES` that are missing; returns those installed.

    See :func:`.debian.ensure_debian_packages`. Raises :class:`NodeSetupError` when they cannot be installed.
    """
    try:
        return debian.ensure_debian_packages(versions.NODE_PACKAGES, "the real node", log=log)
    except debian.MissingPackages as exc:
        raise NodeSetupError(str(exc)) from exc


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["iptables", "-w", "10", *args], check=check)


def _link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def _cgroup_hierarchies() -> list[Path]:
    """Mounted cgroup hierarchies: every v1 controller directory, or the v2 root."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists())


def host_leftovers(workdir: Path | None = None) -> list[str]:
    """What a real node leaves on this host if not removed: processes, mounts, links, iptables
    chains and rules, cgroups, owner file. Empty when the host is clean. ``workdir``: also
    count mounts below it. Used by :meth:`RealNode.teardown_host` and the tests."""
    found: list[str] = []
    names = {build.binary(n).name: str(build.binary(n)) for n in ("containerd", "containerd-shim-runc-v2",
                                                                  "kubelet", "kube-proxy")}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = cmdline(int(entry.name))
            if cmd and cmd[0] in names.values():
                found.append(f"process {entry.name}: {' '.join(cmd)[:120]}")
    roots = [str(workdir)] if workdir else []
    for point in mounts():
        if any(point == r or point.startswith(r + "/") for r in roots) or point.startswith(str(SHIM_SOCKET_DIR)):
            found.append(f"mount {point}")
    if _link_exists(BRIDGE):
        found.append(f"network interface {BRIDGE}")
    for link in Path("/sys/class/net").iterdir():
        master = link / "master"
        if master.exists() and master.resolve().name == BRIDGE:
            found.append(f"network interface {link.name} (on {BRIDGE})")
    if shutil.which("iptables"):
        for table in ("filter", "nat", "mangle"):
            rules = _run(["iptables-save", "-t", table], check=False).stdout
            for line in rules.splitlines():
                if any(word in line for word in ("KUBE-", FIREWALL_CHAIN, BRIDGE, POD_SUBNET)):
                    found.append(f"iptables -t {table}: {line}")
    for h in _cgroup_hierarchies():
        if (h / CGROUP_ROOT).exists():
            found.append(f"cgroup {h / CGROUP_ROOT}")
    for path in (OWNER_FILE, SOCKET_DIR, KUBELET_DEVICE_PLUGIN_SOCKET):
        if path.exists():
            found.append(f"file {path}")
    if CNI_CACHE_DIR.is_dir():
        found += [f"file {p}" for p in CNI_CACHE_DIR.glob(f"{CNI_NETWORK}-*")]
    return found


def read_owner(path: Path | None = None) -> dict[str, Any] | None:
    """The owner record of the real node on this host (:data:`OWNER_FILE`): ``{"dir": str,
    "pids": {pid: binary or None}, "sysctls": {name: value}}``; None when no node claims the host.
    An unreadable or malformed file reads as ``{}`` (an owner that left nothing usable)."""
    path = path or OWNER_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def live_owner_pids(record: dict[str, Any], alive: Callable[[int, str | None], bool]) -> list[int]:
    """Pids of an owner record still running: the starting process by pid (``binary`` None), the
    node's processes by pid and binary (``alive(pid, binary)``; a reused pid runs another binary).
    Malformed entries count as dead. Empty: the owner died without removing its node."""
    pids = record.get("pids")
    live: list[int] = []
    for pid, binary in (pids.items() if isinstance(pids, dict) else ()):
        try:
            number = int(pid)
        except (TypeError, ValueError):
            continue
        if alive(number, binary if isinstance(binary, str) and binary else None):
            live.append(number)
    return sorted(live)


def owner_alive(pid: int, binary: str | None) -> bool:
    """Whether an owner record's process runs: by pid and ``argv[0]`` when ``binary`` is given."""
    return Proc("owner", pid, binary, Path()).alive() if binary else process_alive(pid)


def recover_host(log=sys.stderr) -> list[str]:
    """Remove what a real node left on this host when its owner died (a killed test run, a
    crash): its processes and mounts (:meth:`RealNode._sweep`), then the host state of
    :meth:`RealNode.teardown_host` (bridge, chains, cgroups, sockets, kernel settings restored
    from the owner record). Returns the leftovers found before (:func:`host_leftovers`);
    empty when no node claims the host (:data:`OWNER_FILE` absent), and then nothing is touched.

    Raises :class:`NodeSetupError` when the owner still runs (naming its work dir and pids), or
    when leftovers remain after the recovery (naming them)."""
    record = read_owner()
    if record is None:
        return []
    live = live_owner_pids(record, owner_alive)
    if live:
        raise NodeSetupError(f"another real node runs on this host (work dir {record.get('dir')}, "
                             f"processes {live}); stop it first (its LocalCluster.stop, or "
                             f"`cogate dev down`)")
    workdir = Path(str(record.get("dir") or "/nonexistent"))
    found = host_leftovers(workdir)
    if log is not None:
        log.write(f"real node: the owner of {workdir} is gone; removing what it left "
                  f"({len(found)} items: {', '.join(found[:5])}{', ...' if len(found) > 5 else ''})\n")
    stale = RealNode(workdir)
    sysctls = record.get("sysctls")
    stale.sysctls = {str(k): str(v) for k, v in sysctls.items()} if isinstance(sysctls, dict) else {}
    stale.host_ready = True
    stale._sweep()
    problems = stale.teardown_host()
    if problems:
        raise NodeSetupError(f"could not remove what a dead real node left on this host: {problems}")
    return found


def _read_sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def _write_sysctl(name: str, value: str) -> None:
    try:
        Path("/proc/sys", name).write_text(value + "\n")
    except OSError:
        pass


# --------------------------------------------------------------------- the node

class RealNode:
    """containerd + kubelet + kube-proxy of :data:`NODE_NAME`, for one LocalCluster.

    ``workdir``: the node's directory (``<cluster workdir>/node``). ``timeout``: seconds for
    each component to become ready (kubelet's node Ready included). ``extra_args``: extra flags
    per component (``containerd``, ``kubelet``, ``kube-proxy``).
    Lifecycle, driven by LocalCluster: :meth:`setup_host` (before kube-apiserver, which binds
    :data:`NODE_IP`), :meth:`write_files`, :meth:`start` (after the control plane is ready),
    :meth:`stop` (before the control plane stops), :meth:`teardown_host` (after).
    """

    def __init__(self, workdir: Path, *, timeout: float = 120.0,
                 extra_args: dict[str, list[str]] | None = None) -> None:
        self.dir = Path(workdir)
        self.timeout = timeout
        self.extra_args = extra_args or {}
        self.ports: dict[str, int] = {}
        self.procs: dict[str, Proc] = {}
        self.timings: dict[str, float] = {}
        self.sysctls: dict[str, str] = {}
        #: True once this node has claimed the host (:meth:`setup_host`) until :meth:`teardown_host`;
        #: stop, sweep and teardown touch the host only then.
        self.host_ready = False

    # -- paths ------------------------------------------------------------------
    @property
    def socket(self) -> Path:
        """containerd's gRPC socket (``ctr --address``, kubelet's ``containerRuntimeEndpoint``)."""
        return SOCKET_DIR / "containerd.sock"

    def log_path(self, component: str) -> Path:
        return self.dir / f"{component}.log"

    def state(self) -> dict[str, Any]:
        return {"dir": str(self.dir), "ports": self.ports, "sysctls": self.sysctls, "timings": self.timings,
                "processes": {n: {"pid": p.pid, "binary": p.binary, "log": str(p.log)} for n, p in self.procs.items()}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "RealNode":
        node = cls(Path(state["dir"]))
        node.ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        node.sysctls = dict(state.get("sysctls", {}))
        node.timings = dict(state.get("timings", {}))
        node.procs = {n: Proc(n, int(p["pid"]), p["binary"], Path(p["log"]))
                      for n, p in state.get("processes", {}).items()}
        # Touch the host only if this node still owns it (a later node may have taken over
        # after this one crashed and cleaned its leftovers).
        try:
            node.host_ready = json.loads(OWNER_FILE.read_text()).get("dir") == str(node.dir)
        except (OSError, ValueError):
            node.host_ready = False
        return node

    # -- host -------------------------------------------------------------------
    def setup_host(self, service_cidr: str, log=sys.stderr) -> None:
        """Check tools, claim the host, create the bridge, route, firewall chain and cgroup root.

        ``service_cidr``: the cluster's Service range (kube-apiserver's ``--service-cluster-ip-range``),
        routed through the bridge so that host processes reach ClusterIPs through kube-proxy's rules.

        Raises :class:`NodeSetupError` (after undoing what it did) when not root, a binary or
        package is missing, or another real node runs on this host.
        """
        longest = self.dir / "kubelet" / "plugins_registry" / "kubelet.sock"  # kubelet's sockets live below its root dir
        if len(str(longest)) > 100:
            raise NodeSetupError(f"work dir {self.dir} is too long for kubelet's unix sockets (a socket path "
                                 f"has at most 104-108 bytes): use a shorter work dir")
        if os.geteuid() != 0:
            raise NodeSetupError("the real node needs root (containerd, kubelet and kube-proxy manage "
                                 "mounts, cgroups, network interfaces and iptables)")
        missing = [n for tool in versions.NODE_TOOLS for n in versions.BINARIES[tool] if not build.binary(n).is_file()]
        if missing:
            raise NodeSetupError(f"binaries not built: {missing}; run `python -m cogate.localcluster.build`")
        ensure_host_packages(log)
        self._claim_host()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host_ready = True
        try:
            _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            _run(["ip", "addr", "add", f"{NODE_IP}/{POD_SUBNET.split('/')[1]}", "dev", BRIDGE])
            _run(["ip", "link", "set", BRIDGE, "up"])
            _run(["ip", "route", "add", service_cidr, "dev", BRIDGE, "src", NODE_IP])
            _iptables("-N", FIREWALL_CHAIN)
            _iptables("-A", FIREWALL_CHAIN, "-i", "lo", "-j", "RETURN")
            _iptables("-A", FIREWALL_CHAIN, "-i", BRIDGE, "-j", "RETURN")
            _iptables("-A", FIREWALL_CHAIN, "-j", "DROP")
            _iptables("-I", "INPUT", "-d", POD_SUBNET, "-j", FIREWALL_CHAIN)
            for h in _cgroup_hierarchies():
                (h / CGROUP_ROOT).mkdir(exist_ok=True)
            SOCKET_DIR.mkdir(mode=0o700, exist_ok=True)
        except BaseException:
            self.teardown_host()
            raise

    def _claim_host(self) -> None:
        if OWNER_FILE.exists():
            recover_host(log=None)  # raises NodeSetupError while the owner runs
        elif _link_exists(BRIDGE):
            raise NodeSetupError(f"network interface {BRIDGE} exists but no real node owns it "
                                 f"({OWNER_FILE} missing); remove it with `ip link del {BRIDGE}`")
        self.sysctls = {k: v for k in KUBELET_SYSCTLS if (v := _read_sysctl(k)) is not None}
        self._write_owner()

    def _write_owner(self) -> None:
        pids: dict[int, str | None] = {os.getpid(): None, **{p.pid: p.binary for p in self.procs.values()}}
        OWNER_FILE.write_text(json.dumps({"dir": str(self.dir), "pids": pids, "sysctls": self.sysctls}))

    def teardown_host(self) -> list[str]:
        """Remove the bridge (and its route), the firewall chain, kube-proxy's leftover chains,
        the cgroup root; restore the kernel settings; release the host. Idempotent; returns
        problems (what is still left, see :func:`host_leftovers`)."""
        if not self.host_ready:
            return []
        self.host_ready = False
        problems: list[str] = []
        if _link_exists(BRIDGE):
            _run(["ip", "link", "del", BRIDGE], check=False)
        if shutil.which("iptables"):
            while _iptables("-D", "INPUT", "-d", POD_SUBNET, "-j", FIREWALL_CHAIN, check=False).returncode == 0:
                pass
            _iptables("-F", FIREWALL_CHAIN, check=False)
            _iptables("-X", FIREWALL_CHAIN, check=False)
        if build.binary("kube-proxy").is_file() and shutil.which("iptables"):
            _run([str(build.binary("kube-proxy")), "--cleanup"], check=False)
            _remove_kube_chains()
        for h in _cgroup_hierarchies():
            _remove_cgroup_tree(h / CGROUP_ROOT)
        shutil.rmtree(SOCKET_DIR, ignore_errors=True)
        KUBELET_DEVICE_PLUGIN_SOCKET.unlink(missing_ok=True)
        for stale in CNI_CACHE_DIR.glob(f"{CNI_NETWORK}-*") if CNI_CACHE_DIR.is_dir() else []:
            stale.unlink(missing_ok=True)
        for d in (KUBELET_DEVICE_PLUGIN_SOCKET.parent, KUBELET_DEVICE_PLUGIN_SOCKET.parent.parent,
                  CNI_CACHE_DIR, CNI_CACHE_DIR.parent):
            try:
                d.rmdir()  # only when empty: another tool may keep its files there
            except OSError:
                pass
        for name, value in self.sysctls.items():
            _write_sysctl(name, value)
        OWNER_FILE.unlink(missing_ok=True)
        problems += host_leftovers(self.dir)
        return problems

    # -- files ------------------------------------------------------------------
    def write_files(self, *, ca_cert, ca_key, ca_file: Path, server: str) -> None:
        """Certificates, kubeconfigs and configuration of containerd, CNI, kubelet and kube-proxy.

        ``ca_cert``/``ca_key``: the cluster CA (signs the node's client and serving certificates);
        ``ca_file``: its PEM path; ``server``: kube-apiserver's URL.
        """
        pk = self.dir / "pki"
        names = ("kubelet", "kubelet-healthz", "kube-proxy-healthz", "kube-proxy-metrics")
        self.ports = dict(zip(names, free_ports(len(names))))
        cert, key = pki.issue(ca_cert, ca_key, NODE_NAME, dns_names=[NODE_NAME, "localhost"],
                              ip_addresses=[NODE_IP, "127.0.0.1"], days=365)
        pki.write_pem(pk / "kubelet-serving.crt", cert)
        pki.write_pem(pk / "kubelet-serving.key", key)
        for stem, user, groups in (("kubelet", f"system:node:{NODE_NAME}", ["system:nodes"]),
                                   ("kube-proxy", "system:kube-proxy", [])):
            write_kubeconfig(self.dir / f"{stem}.kubeconfig", server=server, ca_cert=ca_cert, ca_key=ca_key,
                             ca_file=ca_file, pki_dir=pk, stem=stem, user=user, groups=groups)
        cd = self.dir / "containerd"
        (cd / "root").mkdir(parents=True, exist_ok=True)
        (cd / "state").mkdir(parents=True, exist_ok=True)
        net_d = self.dir / "cni" / "net.d"
        net_d.mkdir(parents=True, exist_ok=True)
        _, ref = pauseimage.ensure_pause_image()
        (cd / "config.toml").write_text(_containerd_config(cd, self.socket, net_d, ref))
        (net_d / "10-cogate.conflist").write_text(json.dumps(_cni_config(self.dir / "cni" / "ipam"), indent=2))
        (self.dir / "kubelet.yaml").write_text(yaml.safe_dump(_kubelet_config(
            self.dir, self.socket, pk, ca_file, self.ports["kubelet"], self.ports["kubelet-healthz"])))
        (self.dir / "kube-proxy.yaml").write_text(yaml.safe_dump(_kube_proxy_config(
            self.dir / "kube-proxy.kubeconfig", self.ports["kube-proxy-healthz"], self.ports["kube-proxy-metrics"])))

    # -- processes --------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> Proc:
        env = dict(os.environ)
        # containerd finds the shim, the shim finds runc; kube-proxy and the CNI plugins find iptables.
        env["PATH"] = os.pathsep.join([str(build.bin_dir("containerd")), "/usr/local/sbin", "/usr/local/bin",
                                       "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
        proc = spawn(name, [*argv, *self.extra_args.get(name, [])], self.log_path(name), cwd=self.dir, env=env)
        self.procs[name] = proc
        self._write_owner()
        return proc

    def ctr(self, *args: str, timeout: float = 300.0, check: bool = True) -> subprocess.CompletedProcess:
        """Run the pinned ``ctr`` against this node's containerd, namespace ``k8s.io`` (the CRI's)."""
        cmd = [str(build.binary("ctr")), "--address", str(self.socket), "--namespace", "k8s.io", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise NodeSetupError(f"`ctr {' '.join(args)}` failed with exit code {proc.returncode}: "
                                 f"{(proc.stderr or proc.stdout).strip()}")
        return proc

    def load_image(self, path: str | os.PathLike[str]) -> list[str]:
        """Import an OCI or Docker image archive (``.tar``) into containerd's ``k8s.io`` namespace,
        unpacked for the CRI's snapshotter; pods then run it with ``imagePullPolicy: Never`` (or
        ``IfNotPresent``). The archive must name its images: Docker ``manifest.json`` ``RepoTags``
        (``buildah push IMAGE docker-archive:FILE:NAME:TAG``) or OCI ``index.json`` annotations
        ``io.containerd.image.name`` (or a full name in ``org.opencontainers.image.ref.name``).
        Returns those names. Raises :class:`NodeSetupError` (no such file, not an archive, no name,
        import failed)."""
        path = Path(path)
        if not path.is_file():
            raise NodeSetupError(f"no image archive at {path}")
        refs = _archive_refs(path)
        if not refs:
            raise NodeSetupError(f"{path} names no image; write it with a name, e.g. `buildah push IMAGE "
                                 f"docker-archive:{path}:NAME:TAG`, or an OCI archive whose index.json "
                                 f"carries the annotation io.containerd.image.name")
        self.ctr("images", "import", "--snapshotter", "overlayfs", str(path))
        present = set(self.ctr("images", "list", "--quiet").stdout.split())
        missing = [r for r in refs if r not in present]
        if missing:
            raise NodeSetupError(f"importing {path} did not create {missing}; containerd has {sorted(present)}")
        return refs

    def start(self, api_ready: Callable[[], Any], log=sys.stderr) -> None:
        """Start containerd, import the pause image, start kubelet and kube-proxy, and wait until
        the node is Ready in the API (``api_ready()`` returns an ApiClient) and kube-proxy healthy.
        Raises :class:`NodeSetupError` with the failing component's log tail."""
        t0 = time.monotonic()
        cd = self.dir / "containerd"
        proc = self._spawn("containerd", [str(build.binary("containerd")), "--config", str(cd / "config.toml")])
        self._wait(lambda: self.socket.exists() and self.ctr("version", timeout=5, check=False).returncode == 0,
                   proc, "containerd answering on its socket")
        self.timings["containerd"] = time.monotonic() - t0
        archive, _ = pauseimage.ensure_pause_image(log)
        self.load_image(archive)
        self.timings["pause-image"] = time.monotonic() - t0
        proc = self._spawn("kubelet", [
            str(build.binary("kubelet")), f"--config={self.dir / 'kubelet.yaml'}",
            f"--kubeconfig={self.dir / 'kubelet.kubeconfig'}", f"--root-dir={self.dir / 'kubelet'}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
            f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]}", "--v=1",
        ])
        wait_http(proc, f"http://127.0.0.1:{self.ports['kubelet-healthz']}/healthz", timeout=self.timeout,
                  what="kubelet /healthz", error=NodeSetupError)
        api = api_ready()
        try:
            wait_nodes_ready(api, [NODE_NAME], timeout=self.timeout)
        except NodeError as exc:
            raise NodeSetupError(f"{exc}; last lines of {proc.log}:\n{tail(proc.log)}") from None
        finally:
            api.close()
        self.timings["kubelet"] = time.monotonic() - t0
        proc = self._spawn("kube-proxy", [str(build.binary("kube-proxy")), f"--config={self.dir / 'kube-proxy.yaml'}",
                                          "--v=1"])
        wait_http(proc, f"http://127.0.0.1:{self.ports['kube-proxy-healthz']}/healthz", timeout=self.timeout,
                  what="kube-proxy /healthz (rules synced)", error=NodeSetupError)
        self.timings["kube-proxy"] = time.monotonic() - t0
        self.timings["total"] = time.monotonic() - t0

    def _wait(self, ok: Callable[[], bool], proc: Proc, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not ok():
            if not proc.alive():
                raise NodeSetupError(f"{proc.name} exited (code {proc.returncode}); last lines of {proc.log}:\n"
                                     f"{tail(proc.log)}")
            if time.monotonic() >= deadline:
                raise NodeSetupError(f"{proc.name} not ready after {self.timeout:.0f}s: {what}; "
                                     f"last lines of {proc.log}:\n{tail(proc.log)}")
            time.sleep(0.1)

    # -- stop -------------------------------------------------------------------
    def stop(self, kubectl: Callable[..., subprocess.CompletedProcess] | None, grace: float = 10.0) -> list[str]:
        """Drain and stop the node; returns problems (empty when clean).

        With the API up (``kubectl`` given): cordon, delete the node's pods and wait up to 30 s
        for kubelet to stop them (which tears down their network through CNI). Then stop
        kube-proxy, kubelet; kill and delete what containerd still runs; stop containerd; then
        :meth:`_sweep` (processes in the cgroup root, shims, mounts, netns, log links).
        """
        problems: list[str] = []
        if not self.host_ready:
            return problems
        kubelet = self.procs.get("kubelet")
        if kubectl is not None and kubelet is not None and kubelet.alive():
            try:
                kubectl("cordon", NODE_NAME, check=False, timeout=20)
                kubectl("delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={NODE_NAME}",
                        "--grace-period=1", "--wait=false", check=False, timeout=30)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    out = kubectl("get", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={NODE_NAME}",
                                  "-o", "name", check=False, timeout=20)
                    if out.returncode == 0 and not out.stdout.strip():
                        break
                    time.sleep(0.5)
            except subprocess.TimeoutExpired:
                pass
        for name in ("kube-proxy", "kubelet"):
            proc = self.procs.get(name)
            if proc is not None:
                problems += terminate([proc], grace)
        containerd = self.procs.get("containerd")
        if containerd is not None and containerd.alive():
            self._kill_containers()
            problems += terminate([containerd], grace)
        self._sweep()
        return problems

    def _kill_containers(self) -> None:
        try:
            tasks = self.ctr("tasks", "list", "--quiet", timeout=20, check=False).stdout.split()
            for task in tasks:
                self.ctr("tasks", "kill", "--signal", "SIGKILL", "--all", task, timeout=20, check=False)
            for task in tasks:
                self.ctr("tasks", "delete", "--force", task, timeout=20, check=False)
            containers = self.ctr("containers", "list", "--quiet", timeout=20, check=False).stdout.split()
            if containers:
                self.ctr("containers", "delete", *containers, timeout=60, check=False)
        except subprocess.TimeoutExpired:
            pass

    def _sweep(self) -> None:
        """Remove what a killed node may leave: processes in the cgroup root and shims of this
        node's containerd (SIGKILL), shim sockets, mounts under the work dir, log links.
        Only while this node owns the host (the cgroup root is host-wide)."""
        if not self.host_ready:
            return
        sock = str(self.socket)
        shim = str(build.binary("containerd-shim-runc-v2"))
        shim_sockets: list[Path] = []
        for addr in (self.dir / "containerd" / "state").glob("io.containerd.runtime.v2.task/*/*/address"):
            try:
                shim_sockets.append(Path(addr.read_text().strip().removeprefix("unix://")))
            except OSError:
                pass
        for _ in range(3):
            victims = set()
            for h in _cgroup_hierarchies():
                for procs_file in (h / CGROUP_ROOT).rglob("cgroup.procs") if (h / CGROUP_ROOT).exists() else []:
                    try:
                        victims.update(int(p) for p in procs_file.read_text().split())
                    except OSError:
                        pass
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    cmd = cmdline(int(entry.name))
                    if cmd and cmd[0] == shim and sock in cmd:
                        victims.add(int(entry.name))
            if not victims:
                break
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
            while any(process_alive(p) for p in victims) and time.monotonic() < deadline:
                time.sleep(0.05)
        for path in shim_sockets:
            path.unlink(missing_ok=True)
        root = str(self.dir)
        for point in sorted((m for m in mounts() if m == root or m.startswith(root + "/")),
                            key=lambda m: m.count("/"), reverse=True):
            _run(["umount", "--lazy", point], check=False)
        logs = Path("/var/log/containers")
        if logs.is_dir():
            for link in logs.iterdir():
                try:
                    if link.is_symlink() and os.readlink(link).startswith(root + "/"):
                        link.unlink()
                except OSError:
                    pass
        for d in (SHIM_SOCKET_DIR, SHIM_SOCKET_DIR.parent / "fifo", SHIM_SOCKET_DIR.parent, logs):
            try:
                d.rmdir()  # only when empty, i.e. when this node created it
            except OSError:
                pass


def _remove_kube_chains() -> None:
    """Delete every ``KUBE-*`` iptables chain and the rules jumping to them (filter, nat, mangle).

    ``kube-proxy --cleanup`` removes kube-proxy's own; kubelet adds a few (``KUBE-IPTABLES-HINT``,
    ``KUBE-KUBELET-CANARY``) that nothing removes. Safe because only one real node runs per host.
    """
    for table in ("filter", "nat", "mangle"):
        dump = _run(["iptables-save", "-t", table], check=False).stdout.splitlines()
        chains = [line[1:].split()[0] for line in dump if line.startswith(":KUBE-")]
        for line in dump:
            if line.startswith("-A ") and not line.split()[1].startswith("KUBE-") and " -j KUBE-" in line:
                _iptables("-t", table, "-D", *shlex.split(line)[1:], check=False)
        for chain in chains:
            _iptables("-t", table, "-F", chain, check=False)
        for chain in chains:
            _iptables("-t", table, "-X", chain, check=False)


def _archive_refs(path: Path) -> list[str]:
    """Image names an archive carries: OCI ``index.json`` annotations (``io.containerd.image.name``,
    else ``org.opencontainers.image.ref.name`` when it is a full name) or Docker ``manifest.json``
    ``RepoTags``. Raises :class:`NodeSetupError` when the file is not such an archive."""
    import tarfile

    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            if "index.json" in names:
                index = json.load(tar.extractfile("index.json"))
                refs = []
                for m in index.get("manifests", []):
                    ann = m.get("annotations") or {}
                    ref = ann.get("io.containerd.image.name") or ann.get("org.opencontainers.image.ref.name", "")
                    if "/" in ref or ":" in ref.rpartition("/")[2]:
                        refs.append(ref)
                return refs
            if "manifest.json" in names:
                return [t for m in json.load(tar.extractfile("manifest.json")) for t in m.get("RepoTags") or []]
    except (tarfile.TarError, OSError, ValueError, KeyError) as exc:
        raise NodeSetupError(f"{path} is not a readable image archive: {exc}") from None
    raise NodeSetupError(f"{path} is neither an OCI image archive (index.json) nor a Docker one (manifest.json)")


def _remove_cgroup_tree(path: Path) -> None:
    if not path.is_dir():
        return
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            child.rmdir()
        except OSError:
            pass
    try:
        path.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------- configuration

def _containerd_config(cd: Path, socket: Path, net_d: Path, sandbox_image: str) -> str:
    shim = build.binary("containerd-shim-runc-v2")
    return f"""# Written by cogate.localcluster.host.realnode: one node's containerd, everything under {cd}.
version = 4
root = "{cd / 'root'}"
state = "{cd / 'state'}"
imports = []
# Plugins that would write outside the work dir or that the node does not use.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.image-verifier.v1.bindir",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.mount-handler.v1.erofs",
]

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = "{socket}"
  [plugins."io.containerd.server.v1.ttrpc"]
    address = "{socket}.ttrpc"
  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "{sandbox_image}"
  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    netns_mounts_under_state_dir = true
    # Without CAP_SYS_RESOURCE (missing on some hosts, e.g. this project's VMs) no process may
    # lower its oom_score_adj, and kubelet asks -998 for every sandbox (and -997 for Guaranteed
    # pods): runc then fails with "can't get final child's PID from pipe: EOF". Clamp to
    # containerd's own score instead (0 here), as containerd does for rootless setups.
    restrict_oom_score_adj = {'true' if _lacks_cap_sys_resource() else 'false'}
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "{shim}"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "{RUNC}"
          Root = "{cd / 'state' / 'runc'}"
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["{CNI_BIN_DIR}"]
      conf_dir = "{net_d}"
      max_conf_num = 1
"""


def _lacks_cap_sys_resource() -> bool:
    """True when this process's effective capabilities lack CAP_SYS_RESOURCE (bit 24)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return not (int(line.split()[1], 16) >> 24) & 1
    return True


def _cni_config(ipam_dir: Path) -> dict[str, Any]:
    # isGateway false: the bridge already carries NODE_IP (setup_host), and the bridge plugin
    # would otherwise switch on net.ipv4.ip_forward host-wide. Pods get their default route
    # from the IPAM result instead.
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(ipam_dir),
                      "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                      "routes": [{"dst": "0.0.0.0/0", "gw": NODE_IP}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _kubelet_config(d: Path, socket: Path, pk: Path, ca_file: Path, port: int, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(pk / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pk / "kubelet-serving.key"),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_ROOT}",
        # This host has cgroup v1 (kubelet 1.35+ refuses it unless told otherwise).
        "failCgroupV1": False,
        "failSwapOn": False,
        "registerWithTaints": [NODE_TAINT],
        "podLogsDir": str(d / "pod-logs"),
        "resolvConf": "/etc/resolv.conf",
        # Images are imported, never pulled: never garbage-collect them; a shared development
        # disk must not make the node evict its pods.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "serializeImagePulls": False,
        "staticPodPath": "",
        "maxPods": 110,
    }


def _kube_proxy_config(kubeconfig: Path, healthz_port: int, metrics_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "detectLocalMode": "ClusterCIDR",
        # NodePorts only on the node's bridge address, never on the host's LAN interface.
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        # Leave the host's conntrack settings alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }
