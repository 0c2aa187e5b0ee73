"""``cogate explain`` (and ``kubectl cogate explain``): why is my gang waiting? One command.

The I/O shell of :mod:`cogate.controller.explain`: it reads the cluster once, with the list calls
the controller's informers make (the same :class:`~cogate.controller.kube.features.Feature`
declarations, :func:`~cogate.controller.kube.features.build_caches`, the same converters; each
informer listed once, never watched), adds a manifest's would-be objects (``-f``,
:mod:`cogate.explain_manifests`) and the nodes of ``--add-nodes``, and prints
:func:`cogate.controller.explain.explanation.explain`'s answer. Nothing is written to the cluster.

Exit codes (docs/explain.md): 0 the group would start (or is released, running, finished); 1 it
would not start; 2 usage error (bad flags, unreadable manifest, no such PodGroup or node); 3 the
cluster cannot be reached or read (no configuration, connection refused, unauthorized, forbidden).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from cogate import api, cliargs, kube
from cogate.controller.explain import report
from cogate.controller.explain.explanation import World, explain
from cogate.controller.model import verdicts
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.model.records import NodeInfo, node_info, pod_info
from cogate.controller.status.inputs import group_object, resolve_volumes
from cogate.explain_manifests import ManifestError, PriorityClass, expand

#: Exit statuses (module doc).
STARTS, WAITS, USAGE, UNREACHABLE = 0, 1, 2, 3
#: The informers (by name) a pass cannot do without: failing to list one is exit 3.
REQUIRED = ("podgroups", "members", "bound-pods", "nodes")


#: The kubeconfig read when neither ``--kubeconfig`` nor ``$KUBECONFIG`` names one (as kubectl).
KUBECONFIG_DEFAULT = "~/.kube/config"


class Unreachable(Exception):
    """The cluster cannot be reached or read; the message is one line."""


class UsageError(Exception):
    """Bad arguments or input; the message is one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cogate explain",
        description="Say why a PodGroup waits (or would wait, for a manifest not yet applied), in the words of its "
                    "Released condition: what fits where, the first shortfall per node group, and what preemption "
                    "or N more nodes would change. Reads the cluster once; writes nothing. Exit 0: would start; "
                    "1: would not start; 2: usage error; 3: cannot reach or read the cluster.")
    p.add_argument("target", nargs="*", metavar="[podgroup] NAME",
                   help="the PodGroup (`podgroup NAME`, `pg NAME` or `NAME`); with -f, the PodGroup of the manifest "
                        "to explain when it has several")
    p.add_argument("-f", "--filename", metavar="FILE",
                   help="a manifest not yet applied ('-' for stdin): a PodGroup and its workload (Pods, ReplicaSets, "
                        "Deployments, StatefulSets, Jobs: template x replicas) (default: none, explain a PodGroup of the cluster)")
    p.add_argument("-n", "--namespace", metavar="NAMESPACE",
                   help="namespace (default: the kubeconfig context's, else 'default')")
    p.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, "
                   "then the in-cluster service account)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    p.add_argument("--add-nodes", metavar="N", type=cliargs.positive_int, default=0,
                   help="also say what N more nodes like --node-template would change (default: 0, not asked)")
    p.add_argument("--node-template", metavar="NODE|FILE",
                   help="with --add-nodes: the name of an existing node, or a Node manifest (YAML with status.allocatable) "
                        "(default: none)")
    p.add_argument("--preemption", action=argparse.BooleanOptionalAction, default=True,
                   help="say which pods the controller's preemption would take (dry); as the controller's "
                        "--preemption (default: on)")
    p.add_argument("--gate-name", metavar="NAME", type=cliargs.gate_name, default=api.DEFAULT_GATE_NAME,
                   help="the controller's --gate-name (default: %(default)s)")
    p.add_argument("--scheduler-name", metavar="NAME", action="append", default=[], dest="scheduler_names",
                   help="the controller's --scheduler-name (repeatable) (default: none)")
    p.add_argument("--unchecked-constraints", choices=verdicts.UNCHECKED_POLICIES, default=verdicts.DEFAULT_UNCHECKED,
                   help="the controller's --unchecked-constraints (default: %(default)s)")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format (default: %(default)s)")
    return p


def _target(args: argparse.Namespace) -> str | None:
    words = list(args.target)
    if words and words[0] in ("podgroup", "podgroups", "pg", "pgs") and len(words) == 2:
        words = words[1:]
    if len(words) > 1:
        raise UsageError(f"one PodGroup name expected, got {' '.join(args.target)!r}")
    if not words and not args.filename:
        raise UsageError("name a PodGroup (`cogate explain NAME`) or give a manifest (`-f FILE`)")
    if args.add_nodes and not args.node_template:
        raise UsageError("--add-nodes needs --node-template (a node name or a Node manifest)")
    return words[0] if words else None


# -- reading the cluster once ------------------------------------------------------------------


@dataclass
class OneShot:
    """An informer listed once: the :class:`~cogate.controller.kube.informer.Informer` methods a
    pass reads (``snapshot``, ``snapshot_map``, ``get``, ``add_handler``), filled by one list
    call converted as the informer converts (an invalid object is skipped and noted)."""

    name: str
    store: dict[Hashable, Any] = field(default_factory=dict)
    raws: dict[Hashable, Any] = field(default_factory=dict)
    has_synced: bool = True

    def snapshot(self) -> list[Any]:
        return list(self.store.values())

    def snapshot_map(self) -> dict[Hashable, Any]:
        return dict(self.store)

    def get(self, key: Hashable) -> Any:
        return self.store.get(key)

    def add_handler(self, handler: Callable[..., Any]) -> None:
        """No events come: the snapshot does not change."""


def _one_line(exc: BaseException) -> str:
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    if status:
        return f"HTTP {status} {reason or ''}".strip()
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def lister(notes: list[str]) -> Callable[..., OneShot]:
    """``make(name, (list_fn, watch_fn), key, convert) -> OneShot`` for ``build_caches``: lists at
    once. A required cache (:data:`REQUIRED`) that cannot be listed raises :class:`Unreachable`;
    another is left empty with a note."""
    def make(name: str, source: tuple[Callable[..., Any], Any], key: Callable[..., Hashable],
             convert: Callable[..., Any]) -> OneShot:
        shot = OneShot(name)
        try:
            items, _ = source[0]()
        except Exception as exc:  # noqa: BLE001 - any failure to read is said in one line
            if name in REQUIRED:
                raise Unreachable(f"cannot list {name}: {_one_line(exc)}") from exc
            notes.append(f"{name} not read ({_one_line(exc)}): left out")
            return shot
        for raw in items:
            try:
                k = key(raw)
                shot.store[k], shot.raws[k] = convert(raw), raw
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                meta = raw.get("metadata") or {} if isinstance(raw, dict) else {}
                notes.append(f"{name}: invalid object {meta.get('namespace', '')}/{meta.get('name', '?')} skipped: {exc}")
        return shot
    return make


class _Notes(logging.Handler):
    def __init__(self, notes: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.notes = notes

    def emit(self, record: logging.LogRecord) -> None:
        self.notes.append(record.getMessage())


@contextlib.contextmanager
def warnings_as_notes(notes: list[str]) -> Iterator[None]:
    """Inside the block, what cogate's modules log at WARNING or above goes into ``notes`` (printed
    with the answer) instead of stderr."""
    logger = logging.getLogger("cogate")
    handler, propagate = _Notes(notes), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def client_for(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """(``ApiClient``, the context's namespace or 'default'); raises :class:`Unreachable`."""
    from kubernetes import client, config

    cfg = client.Configuration()
    namespace = "default"
    missing = kube.missing_kubeconfig(kubeconfig, default=KUBECONFIG_DEFAULT)
    try:
        try:
            if missing:
                raise config.ConfigException(missing)
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((c for c in contexts if c["name"] == context), active) if context else active
            namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
        except config.ConfigException as first:
            if kubeconfig or context:
                raise
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException as exc:  # name both: the kubeconfig first, then in-cluster
                raise config.ConfigException(f"{_one_line(first)}; not in a cluster either ({_one_line(exc)})") \
                    from exc
            namespace = kube.own_namespace("default")
    except Exception as exc:  # noqa: BLE001
        raise Unreachable(f"no usable Kubernetes configuration: {_one_line(exc)}") from exc
    cfg.retries = 1  # one retry (a dropped keep-alive connection), as a command line should: not urllib3's 3 with back-off
    return client.ApiClient(cfg), namespace


def read_world(api_client: Any, config: ReconcilerConfig, notes: list[str],
               extra_groups: list[dict[str, Any]], extra_pods: list[dict[str, Any]]) -> tuple[World, OneShot]:
    """The controller's caches, listed once (its features' declarations), as a :class:`World`, with
    the manifest's PodGroups (replacing any of the same name) and would-be pods added; and the
    nodes cache (its raw objects serve ``--node-template``). Raises :class:`Unreachable`."""
    from cogate.controller import core
    from cogate.controller.devices import feature as devices_feature
    from cogate.controller.devices.room import Devices
    from cogate.controller.kube.features import build_caches
    from cogate.controller.main import typed_apis
    from cogate.controller.preemption import feature as preemption_feature

    try:
        with warnings_as_notes(notes):  # e.g. the devices feature's "DRA devices are not modelled (...)"
            caches = build_caches((core.FEATURE, preemption_feature.FEATURE, devices_feature.FEATURE),
                                  typed_apis(api_client), config, None, lister(notes))
    except Unreachable:
        raise
    except Exception as exc:  # noqa: BLE001 - discovery failing
        raise Unreachable(f"cannot read the cluster: {_one_line(exc)}") from exc
    groups = {g.key: g for g in caches.podgroups.snapshot()}
    try:
        for raw in extra_groups:
            g = group_object(raw)
            groups[g.key] = g
        labelled = caches.members.snapshot()
        taken = {(p.namespace, p.name) for p in labelled}
        labelled += [pod_info(raw) for raw in extra_pods
                     if (raw["metadata"]["namespace"], raw["metadata"]["name"]) not in taken]
    except ValueError as exc:
        raise UsageError(f"manifest: {' '.join(str(exc).split())}") from exc
    labelled = resolve_volumes(labelled, caches.claims.snapshot_map() if caches.claims else None,
                               caches.volumes.snapshot_map() if caches.volumes else None)
    devices = Devices(caches.resource_slices, caches.device_classes, caches.resource_claims,
                      caches.claim_templates, caches.nodes, caches.bound)
    labelled = devices.resolve(labelled, None)
    pods = [devices.bound_pod(p) for p in caches.bound.snapshot() if p.bound and not p.terminal]
    if caches.nominated is not None:
        pods += [p for p in caches.nominated.snapshot() if p is not None]
    world = World(tuple(devices.nodes(caches.nodes.snapshot())), tuple(pods), tuple(groups.values()), tuple(labelled),
                  tuple(caches.quotas.snapshot() if caches.quotas else ()),
                  tuple(caches.budgets.snapshot() if caches.budgets else ()),
                  tuple(caches.native_groups.snapshot() if caches.native_groups else ()))
    return world, caches.nodes  # type: ignore[return-value]


def template_nodes(template: str, count: int, nodes: OneShot) -> list[NodeInfo]:
    """``count`` copies of node ``template`` (an existing node's name, or a Node manifest file),
    named ``<name>-explain-<i>``. Raises :class:`UsageError`."""
    raw = nodes.raws.get(template)
    if raw is None:
        try:
            with open(template) as fh:
                raw = yaml.safe_load(fh)
        except OSError as exc:
            raise UsageError(f"--node-template {template!r}: no such node, and not a readable file ({exc.strerror})") from exc
        except yaml.YAMLError as exc:
            raise UsageError(f"--node-template {template!r}: not YAML: {' '.join(str(exc).split())}") from exc
        if not isinstance(raw, dict) or raw.get("kind") != "Node":
            raise UsageError(f"--node-template {template!r}: not a Node manifest")
        raw = copy.deepcopy(raw)
        raw.setdefault("status", {}).setdefault("conditions", [{"type": "Ready", "status": "True"}])
    base = (raw.get("metadata") or {}).get("name") or "node"
    out = []
    for i in range(count):
        clone = copy.deepcopy(raw)
        name = f"{base}-explain-{i}"
        meta = clone.setdefault("metadata", {})
        meta["name"] = name
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/hostname": name}
        try:
            out.append(node_info(clone))
        except ValueError as exc:
            raise UsageError(f"--node-template {template!r}: {' '.join(str(exc).split())}") from exc
    return out


def priority_classes(api_client: Any, notes: list[str]) -> dict[str, PriorityClass] | None:
    """The cluster's PriorityClasses by name (one list call); None, with a note, when they cannot be read."""
    from kubernetes import client

    try:
        items = client.SchedulingV1Api(api_client).list_priority_class().items
    except Exception as exc:  # noqa: BLE001
        notes.append(f"priorityclasses not read ({_one_line(exc)}): the manifest's pods keep the priority they state")
        return None
    return {pc.metadata.name: PriorityClass(pc.metadata.name, int(pc.value or 0),
                                            pc.preemption_policy or "PreemptLowerPriority", bool(pc.global_default))
            for pc in items}


def _manifest(path: str, namespace: str, now: float, config: ReconcilerConfig, api_client: Any,
              notes: list[str]) -> tuple[list, list]:
    try:
        text = sys.stdin.read() if path == "-" else open(path).read()
        docs = list(yaml.safe_load_all(text))
        got = expand(docs, namespace, now, config.gate_name, config.scheduler_names,
                     priority_classes(api_client, notes))
    except OSError as exc:
        raise UsageError(f"-f {path}: {exc.strerror}") from exc
    except (yaml.YAMLError, ManifestError) as exc:
        raise UsageError(f"-f {path}: {' '.join(str(exc).split())}") from exc
    if not got.podgroups:
        raise UsageError(f"-f {path}: no PodGroup ({api.GROUP}/{api.VERSION}) in the manifest")
    notes += [f"skipped {s}: not a workload kind" for s in got.skipped] + [f"webhook: {w}" for w in got.warnings]
    return list(got.podgroups), list(got.pods)


def run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """Explain and print; the exit status (module doc). Raises :class:`UsageError`, :class:`Unreachable`."""
    name = _target(args)
    now = time.time()
    config = ReconcilerConfig(gate_name=args.gate_name, preemption=args.preemption, unchecked=args.unchecked_constraints,
                              scheduler_names=frozenset({verdicts.DEFAULT_SCHEDULER, *args.scheduler_names}))
    api_client, context_ns = client_for(args.kubeconfig, args.context)
    namespace = args.namespace or context_ns
    notes: list[str] = []
    groups, pods = _manifest(args.filename, namespace, now, config, api_client, notes) if args.filename else ([], [])
    if groups and name is None:
        if len(groups) > 1:
            raise UsageError(f"-f {args.filename}: {len(groups)} PodGroups; name the one to explain")
        name, namespace = groups[0]["metadata"]["name"], groups[0]["metadata"]["namespace"]
    elif groups:
        namespace = next((g["metadata"]["namespace"] for g in groups if g["metadata"]["name"] == name), namespace)
    world, nodes = read_world(api_client, config, notes, groups, pods)
    extra = template_nodes(args.node_template, args.add_nodes, nodes) if args.add_nodes else []
    try:
        e = explain(world, namespace, name, now, config, extra_nodes=extra, preemption=args.preemption)
    except LookupError as exc:
        raise UsageError(str(exc).strip("'\"")) from exc
    if notes:
        e = dataclasses.replace(e, notes=tuple(notes) + e.notes)
    if args.output == "json":
        out(json.dumps(e.to_dict(), indent=2) + "\n")
    elif args.output == "yaml":
        out(yaml.safe_dump(e.to_dict(), sort_keys=False))
    else:
        out(report.text(e))
    return STARTS if e.starts else WAITS


def main(argv: list[str] | None = None) -> int:
    """``cogate explain``: exit status per the module doc; errors are one line on stderr."""
    args = build_parser().parse_args(argv)
    try:
        return run(args, sys.stdout.write)
    except UsageError as exc:
        print(f"cogate explain: {exc}", file=sys.stderr)
        return USAGE
    except Unreachable as exc:
        print(f"cogate explain: {exc}", file=sys.stderr)
        return UNREACHABLE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
