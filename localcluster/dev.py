"""``cogate dev up|down|status|build``: the demo's environment, left running for you to try.

``cogate dev up`` starts the local control plane (kube-apiserver, etcd, kube-scheduler,
kube-controller-manager, kwok) in the background, adds fake nodes of the shape you give,
installs the PodGroup CRD, starts cogate's webhook and controller as background processes,
and prints the ``KUBECONFIG`` to use. ``cogate dev down`` stops every process it started
(by pid) and removes its directory. State lives in ``$COGATE_DEV_DIR`` (default
``$COGATE_CACHE_DIR/dev``, i.e. ``~/.cache/cogate/dev``). ``--real-node`` adds a real kubelet
node beside the fake ones (see :mod:`cogate.localcluster.host.realnode`, imported only then);
``down`` removes it too. ``--no-cogate`` leaves cogate out (no CRD, no webhook, no controller),
so that the chart can install it: Helm refuses to adopt a CRD it did not create.
``--autoscaler`` also runs the real cluster-autoscaler (kwok provider) with one node group,
:data:`~cogate.localcluster.autoscaler.AUTOSCALED` (nodes of 16 CPU, 64Gi, 110 pods labelled
``cogate.dev/node-group=autoscaled``, 0 to 4 of them), and runs cogate's controller with
``--provisioning-class best-effort-atomic-scale-up.autoscaling.x-k8s.io`` (when the controller has
that flag); ``down`` stops it too. What ``up`` builds and starts is :func:`plan` of its
arguments: the control plane's Go tools only, the real node's with ``--real-node``, the
autoscaler's with ``--autoscaler``, never Helm.

Exit codes: 0 ok, 1 failure (message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import build, versions
from .autoscaler import AUTOSCALED, GROUP_LABEL, PROVISIONING_CLASS, AutoscalerSpec
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
    real node's with ``--real-node`` and the autoscaler's with ``--autoscaler``; never Helm (only the
    chart's tests and commands run it).
    ``real_node``: start a real kubelet node. ``cogate``: install the PodGroup CRD and run the webhook
    and the controller as local processes; false with ``--no-cogate`` (the chart installs them).
    ``autoscaler``: how to run cluster-autoscaler (:data:`DEV_AUTOSCALER`), None without
    ``--autoscaler``. ``controller_args``: appended to the controller's command line
    (``--provisioning-class <class>`` with ``--autoscaler``). ``kubernetes_version``: the release
    (a key of :data:`versions.RELEASES`, ``--kubernetes-version``, else ``$COGATE_KUBERNETES_VERSION``,
    else the default); ``feature_gates``: ``--feature-gates`` (else ``$COGATE_FEATURE_GATES``) parsed.
    """

    tools: tuple[str, ...]
    real_node: bool
    cogate: bool
    autoscaler: AutoscalerSpec | None = None
    controller_args: tuple[str, ...] = ()
    kubernetes_version: str = versions.DEFAULT_RELEASE
    feature_gates: Mapping[str, bool] = field(default_factory=dict)


#: The autoscaler of ``dev up --autoscaler``: the group :data:`AUTOSCALED`; scale-down on, an
#: empty node removed after 1 min unneeded and no sooner than 1 min after a scale-up (the
#: autoscaler's defaults are 10 min each), so that a user sees nodes come and go.
DEV_AUTOSCALER = AutoscalerSpec(groups=(AUTOSCALED,), scale_down_unneeded_time=60.0,
                                scale_down_delay_after_add=60.0)
#: The controller's flag turning provisioning on (issue 16), and its value with ``--autoscaler``.
PROVISIONING_FLAG = "--provisioning-class"


def plan(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> UpPlan:
    """The :class:`UpPlan` of parsed ``dev up`` arguments (builds and starts nothing; reads
    ``environ`` for the release and gates not given). Raises ``ValueError`` for an unknown release
    (listing the supported ones) or a malformed feature gate."""
    autoscaler = DEV_AUTOSCALER if args.autoscaler else None
    return UpPlan(tools=(versions.CONTROL_PLANE_TOOLS + (versions.NODE_TOOLS if args.real_node else ())
                         + (versions.AUTOSCALER_TOOLS if autoscaler else ())),
                  real_node=args.real_node, cogate=args.cogate, autoscaler=autoscaler,
                  controller_args=(PROVISIONING_FLAG, PROVISIONING_CLASS) if autoscaler and args.cogate else (),
                  kubernetes_version=versions.release(args.kubernetes_version, environ).kubernetes,
                  feature_gates=versions.feature_gates(args.feature_gates, environ))


def controller_flags() -> set[str]:
    """Every option string of ``cogate controller``'s parser (``cogate.controller.main``)."""
    from cogate.controller.main import build_parser as controller_parser

    return {opt for action in controller_parser()._actions for opt in action.option_strings}


def supported_controller_args(args: tuple[str, ...], flags: set[str]) -> tuple[tuple[str, ...], list[str]]:
    """``args`` (``--flag value`` pairs) split into those whose flag is in ``flags`` and the names of
    those left out (a controller older than the flag)."""
    kept: list[str] = []
    dropped: list[str] = []
    for flag, value in zip(args[::2], args[1::2]):
        if flag in flags:
            kept += [flag, value]
        else:
            dropped.append(flag)
    return tuple(kept), dropped


def up(args: argparse.Namespace) -> int:
    cluster_state, cogate_state = _state_paths()
    if cluster_state.exists():
        print(f"a dev environment is already up (state {cluster_state}); run `cogate dev down` first",
              file=sys.stderr)
        return 1
    try:
        todo = plan(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        build.ensure_binaries(list(todo.tools), kubernetes_version=todo.kubernetes_version)
    except build.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    controller_args, dropped = supported_controller_args(todo.controller_args, controller_flags()) \
        if todo.controller_args else ((), [])
    cluster = LocalCluster(workdir=dev_dir() / "cluster", keep=True, real_node=todo.real_node,
                           autoscaler=todo.autoscaler, kubernetes_version=todo.kubernetes_version,
                           feature_gates=todo.feature_gates)
    try:
        cluster.start(detach=True)
        cluster.add_nodes(args.nodes, prefix="node-", cpu=args.cpu, memory=args.memory, pods=args.pods,
                          labels=dict(args.label), taints=args.taint, kwok_taint=args.kwok_taint)
        if todo.cogate:
            stack = CogateStack(cluster, dev_dir() / "cogate", controller_args=controller_args).start()
            # The stack's processes run in their own session; this process may exit.
            cogate_state.write_text(json.dumps(stack.state(), indent=2))
    except (ClusterError, StackError, ValueError, build.BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        LocalCluster.stop_from_state(cluster_state, keep=False) if cluster_state.exists() else None
        return 1
    print(f"cogate dev environment is up: Kubernetes {todo.kubernetes_version}"
          + "".join(f", {k}={'true' if v else 'false'}" for k, v in sorted(todo.feature_gates.items()))
          + f", {args.nodes} node(s) of cpu {args.cpu}, memory {args.memory}")
    if todo.real_node:
        print(f"  real node {NODE_NAME} ({NODE_IP}), tainted "
              f"{NODE_TAINT['key']}={NODE_TAINT['value']}:{NODE_TAINT['effect']}; "
              f"load images with: {build.binary('ctr')} --address {cluster.node.socket} -n k8s.io images import IMAGE.tar")
    if todo.autoscaler:
        for g in todo.autoscaler.groups:
            print(f"  cluster-autoscaler: node group {g.name}, {g.min} to {g.max} nodes of cpu {g.cpu // 1000}, "
                  f"memory {g.memory // 2**30}Gi, pods {g.pods}, labelled "
                  + ", ".join(f"{k}={v}" for k, v in g.labels.items())
                  + f"; pods get its nodes with nodeSelector {GROUP_LABEL}: {g.name}")
        if controller_args:
            print(f"  cogate's controller runs with {' '.join(controller_args)}")
        elif dropped:
            print(f"  cogate's controller has no {', '.join(dropped)} flag yet: it does not ask the autoscaler "
                  "for gangs' nodes")
    if not todo.cogate:
        print("  cogate is not installed (--no-cogate): no PodGroup CRD, webhook or controller; install it "
              "with the chart (docs/development.md, \"Installing the chart on the dev cluster\")")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print(f"  kubectl: {build.binary('kubectl', todo.kubernetes_version)} (or any kubectl >= 1.30)")
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
    from .host import realnode  # host tooling: loaded only here (the control plane needs none)

    owner = realnode.read_owner()
    if owner is not None and not realnode.live_owner_pids(owner, realnode.owner_alive):
        # A real node whose owner died (a killed test run, a crash) left its host state behind.
        try:
            found = realnode.recover_host(log=sys.stderr)
        except realnode.NodeSetupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"removed what a dead real node left on this host ({len(found)} items)")
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
    p_up.add_argument("--autoscaler", action="store_true",
                      help="also run the real cluster-autoscaler (kwok provider, ProvisioningRequests on) with "
                           f"one node group, {AUTOSCALED.name}: 0 to {AUTOSCALED.max} nodes of 16 CPU, 64Gi, "
                           f"110 pods, labelled {GROUP_LABEL}={AUTOSCALED.name}; cogate's controller then asks it "
                           f"for gangs' nodes ({PROVISIONING_FLAG} {PROVISIONING_CLASS}) (default: off)")
    p_up.add_argument("--cogate", action=argparse.BooleanOptionalAction, default=True,
                      help="install the PodGroup CRD and run cogate's webhook and controller as local "
                           "processes; --no-cogate leaves them out, for installing cogate with the Helm "
                           "chart instead (default: on)")
    p_up.add_argument("--kubernetes-version", metavar="VERSION", default=None,
                      help="Kubernetes release of the control plane, one of "
                           f"{', '.join(v.lstrip('v') for v in versions.RELEASES)} (default: "
                           f"${versions.KUBERNETES_VERSION_ENV}, else {versions.DEFAULT_RELEASE.lstrip('v')})")
    p_up.add_argument("--feature-gates", metavar="NAME=BOOL[,...]", default=None,
                      help="feature gates of kube-apiserver, kube-scheduler and kube-controller-manager, e.g. "
                           "GenericWorkload=true (native gang scheduling; its API version is turned on too) "
                           f"(default: ${versions.FEATURE_GATES_ENV}, else none)")
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
