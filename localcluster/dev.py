"""``cogate dev up|down|status|build``: the demo's environment, left running for you to try.

``cogate dev up`` starts the local control plane (kube-apiserver, etcd, kube-scheduler,
kube-controller-manager, kwok) in the background, adds fake nodes of the shape you give,
installs the PodGroup CRD, starts cogate's webhook and controller as background processes,
and prints the ``KUBECONFIG`` to use. ``cogate dev down`` stops every process it started
(by pid) and removes its directory. State lives in ``$COGATE_DEV_DIR`` (default
``$COGATE_CACHE_DIR/dev``, i.e. ``~/.cache/cogate/dev``). ``--real-node`` adds a real kubelet
node beside the fake ones (see :mod:`cogate.localcluster.host.realnode`, imported only then);
``down`` removes it too. ``--no-cogate`` leaves cogate out (no CRD, no webhook, no controller),
so that the chart can install it: Helm refuses to adopt a CRD it did not create. What ``up``
builds and starts is :func:`plan` of its arguments: the control plane's Go tools only, the real
node's with ``--real-node``, never Helm.

Exit codes: 0 ok, 1 failure (message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import build, versions
from .cluster import ClusterError, LocalCluster
from .host import NODE_IP, NODE_NAME, NODE_TAINT
from .procs import Proc, process_alive, terminate
from .stack import CogateStack, StackError


def dev_dir() -> Path:
    """Where ``dev up`` keeps its state and logs: ``$COGATE_DEV_DIR``, else ``<cache dir>/dev``."""
    env = os.environ.get("COGATE_DEV_DIR")
    return Path(env).expanduser() if env else build.cache_dir() / "dev"


def _state_paths() -> tuple[Path, Path]:
    d = dev_dir()
    return d / "cluster" / "state.json", d / "cogate.json"


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"label must be KEY=VALUE, got {text!r}")
    return key, value


def _taint(text: str) -> dict[str, str]:
    """``KEY[=VALUE]:EFFECT`` as kubectl taint writes it."""
    kv, sep, effect = text.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise argparse.ArgumentTypeError(f"taint must be KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute, got {text!r}")
    key, _, value = kv.partition("=")
    return {"key": key, "value": value, "effect": effect}


@dataclass(frozen=True)
class UpPlan:
    """What ``cogate dev up`` builds and starts.

    ``tools``: the Go tools to build (keys of :data:`versions.TOOLS`): the control plane's, plus the
    real node's with ``--real-node``; never Helm (only the chart's tests and commands run it).
    ``real_node``: start a real kubelet node. ``cogate``: install the PodGroup CRD and run the webhook
    and the controller as local processes; false with ``--no-cogate`` (the chart installs them).
    """

    tools: tuple[str, ...]
    real_node: bool
    cogate: bool


def plan(args: argparse.Namespace) -> UpPlan:
    """The :class:`UpPlan` of parsed ``dev up`` arguments (pure: builds and starts nothing)."""
    return UpPlan(tools=versions.CONTROL_PLANE_TOOLS + (versions.NODE_TOOLS if args.real_node else ()),
                  real_node=args.real_node, cogate=args.cogate)


def up(args: argparse.Namespace) -> int:
    cluster_state, cogate_state = _state_paths()
    if cluster_state.exists():
        print(f"a dev environment is already up (state {cluster_state}); run `cogate dev down` first",
              file=sys.stderr)
        return 1
    todo = plan(args)
    try:
        build.ensure_binaries(list(todo.tools))
    except build.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    cluster = LocalCluster(workdir=dev_dir() / "cluster", keep=True, real_node=todo.real_node)
    try:
        cluster.start(detach=True)
        cluster.add_nodes(args.nodes, prefix="node-", cpu=args.cpu, memory=args.memory, pods=args.pods,
                          labels=dict(args.label), taints=args.taint, kwok_taint=args.kwok_taint)
        if todo.cogate:
            stack = CogateStack(cluster, dev_dir() / "cogate").start()
            # The stack's processes run in their own session; this process may exit.
            cogate_state.write_text(json.dumps(stack.state(), indent=2))
    except (ClusterError, StackError, ValueError, build.BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        LocalCluster.stop_from_state(cluster_state, keep=False) if cluster_state.exists() else None
        return 1
    print(f"cogate dev environment is up: {args.nodes} node(s) of cpu {args.cpu}, memory {args.memory}")
    if todo.real_node:
        print(f"  real node {NODE_NAME} ({NODE_IP}), tainted "
              f"{NODE_TAINT['key']}={NODE_TAINT['value']}:{NODE_TAINT['effect']}; "
              f"load images with: {build.binary('ctr')} --address {cluster.node.socket} -n k8s.io images import IMAGE.tar")
    if not todo.cogate:
        print("  cogate is not installed (--no-cogate): no PodGroup CRD, webhook or controller; install it "
              "with the chart (README.md, \"Using it on a real cluster\")")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print(f"  kubectl: {build.binary('kubectl')} (or any kubectl >= 1.30)")
    print(f"  logs: {dev_dir()}/cluster/*.log"
          + (f", {dev_dir()}/cogate/{{webhook,controller}}.log" if todo.cogate else ""))
    print("  stop it with: cogate dev down")
    return 0


def down(args: argparse.Namespace) -> int:
    cluster_state, cogate_state = _state_paths()
    if cogate_state.exists():
        state = json.loads(cogate_state.read_text())
        procs = [Proc(name, int(info["pid"]), info.get("binary", sys.executable), Path(info.get("log", "")))
                 for name, info in state.items() if isinstance(info, dict) and "pid" in info]
        problems = terminate(procs, grace=10.0)
        if problems:
            print(f"error: {'; '.join(problems)}", file=sys.stderr)
        cogate_state.unlink()
    shutil.rmtree(dev_dir() / "cogate", ignore_errors=True)
    if cluster_state.exists():
        LocalCluster.stop_from_state(cluster_state, keep=False)
        print("cogate dev environment stopped")
    else:
        print("no dev environment is up")
    return 0


def status(args: argparse.Namespace) -> int:
    cluster_state, cogate_state = _state_paths()
    if not cluster_state.exists():
        print("no dev environment is up")
        return 0
    state = LocalCluster.read_state(cluster_state)
    procs = {k: v["pid"] for k, v in state.get("processes", {}).items() if isinstance(v, dict) and "pid" in v}
    procs |= {k: v["pid"] for k, v in ((state.get("real_node") or {}).get("processes") or {}).items()}
    if cogate_state.exists():
        procs |= {k: v["pid"] for k, v in json.loads(cogate_state.read_text()).items() if isinstance(v, dict)}
    for name, pid in procs.items():
        print(f"  {name:<24} pid {pid:<8} {'running' if process_alive(pid) else 'NOT RUNNING'}")
    print(f"  export KUBECONFIG={state.get('kubeconfig')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``cogate dev``; subcommand in ``command`` (``up``: see :func:`plan`)."""
    parser = argparse.ArgumentParser(
        prog="cogate dev",
        description="Start, inspect or stop a local Kubernetes control plane with cogate running, left up in "
                    "the background for you to try PodGroups with kubectl.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser(
        "up", help="start the local environment in the background",
        description="Start the local control plane, fake nodes of the given shape, and cogate's webhook and "
                    "controller in the background, then print the KUBECONFIG to use.",
    )
    p_up.add_argument("--nodes", type=int, default=1, metavar="N",
                      help="number of fake nodes (default: %(default)s)")
    p_up.add_argument("--cpu", default="10", metavar="QUANTITY",
                      help="allocatable cpu per node (default: %(default)s)")
    p_up.add_argument("--memory", default="8Gi", metavar="QUANTITY",
                      help="allocatable memory per node (default: %(default)s)")
    p_up.add_argument("--pods", type=int, default=110, metavar="N",
                      help="allocatable pods per node (default: %(default)s)")
    p_up.add_argument("--label", type=_label, action="append", default=[], metavar="KEY=VALUE",
                      help="node label, repeatable (default: none)")
    p_up.add_argument("--taint", type=_taint, action="append", default=[], metavar="KEY[=VALUE]:EFFECT",
                      help="node taint, repeatable (default: none)")
    p_up.add_argument("--kwok-taint", action=argparse.BooleanOptionalAction, default=False,
                      help="also taint nodes kwok.x-k8s.io/node=fake:NoSchedule (default: off)")
    p_up.add_argument("--real-node", action="store_true",
                      help=f"also run a real kubelet node, {NODE_NAME} (containerd, runc, kubelet, "
                           f"kube-proxy; needs root; tainted {NODE_TAINT['key']}=true:NoSchedule) "
                           "(default: off)")
    p_up.add_argument("--cogate", action=argparse.BooleanOptionalAction, default=True,
                      help="install the PodGroup CRD and run cogate's webhook and controller as local "
                           "processes; --no-cogate leaves them out, for installing cogate with the Helm "
                           "chart instead (default: on)")
    sub.add_parser("down", help="stop everything `cogate dev up` started and remove its files",
                   description="Stop every process `cogate dev up` started and remove its directory.")
    sub.add_parser("status", help="show the processes of the dev environment",
                   description="Show whether each process of the dev environment is running.")
    sub.add_parser("build", help="build (or check) the cached control-plane binaries",
                   description="Build the local control plane's binaries from pinned Go modules, "
                               "or check that they are cached.")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "build":  # what `make binaries` builds: every Go tool and the real node's pause image
        from .host import pauseimage

        return build.main([]) or pauseimage.main([])
    return {"up": up, "down": down, "status": status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
