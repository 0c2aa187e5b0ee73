"""``cogate demo``: the README example on a local control plane, printed as a user sees it.

Starts the Go-built control plane (building it once if needed), one kwok node with
allocatable cpu 10 / memory 8Gi / pods 110, the webhook and the controller as real
processes; applies PodGroup ``nginx`` (minMember 3) and a ReplicaSet of 6 pods of
3 CPU; prints ``kubectl get pods`` and ``kubectl get pg``; then does the same with
minMember 4. After each case it prints what it saw and compares it with the README's promise
(:mod:`.demojudge`); it exits 1 when either case differs. Everything is torn down on exit or Ctrl-C.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from . import build, demojudge, example, versions
from . import nodes as fake_nodes
from .cluster import LocalCluster
from .stack import CogateStack

NAMESPACE = "demo"


def _banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def _apply(cluster: LocalCluster, *objs: dict, path: Path) -> None:
    path.write_text(yaml.safe_dump_all(objs))
    cluster.kubectl("apply", "-f", str(path))


def _pods(cluster: LocalCluster) -> list[dict]:
    import json

    out = cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l", "app=nginx", "-o", "json").stdout
    return json.loads(out)["items"]


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return predicate()


#: Why each pod is (not) scheduled: the PodScheduled condition kube-scheduler and the API server set.
_SCHEDULED_COLUMNS = ('custom-columns=NAME:.metadata.name,PODSCHEDULED:.status.conditions[?(@.type=="PodScheduled")]'
                      '.reason,MESSAGE:.status.conditions[?(@.type=="PodScheduled")].message')


def _run_shown(cluster: LocalCluster, *args: str) -> None:
    """Print ``$ kubectl <args>`` exactly as it runs (shell-quoted, copy-pasteable), then its output."""
    print(f"$ kubectl {shlex.join(args)}")
    print(cluster.kubectl(*args).stdout.rstrip())


#: One line per PodGroup condition: ``<type>=<status> <reason>: <message>``.
_CONDITION_LINES = 'jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\\n"}{end}'


def _show(cluster: LocalCluster) -> None:
    _run_shown(cluster, "get", "pods", "-n", NAMESPACE, "-o", "wide")
    _run_shown(cluster, "get", "pods", "-n", NAMESPACE, "-o", _SCHEDULED_COLUMNS)
    _run_shown(cluster, "get", "pg", "-n", NAMESPACE, "-o", "wide")
    _run_shown(cluster, "get", "pg", "nginx", "-n", NAMESPACE, "-o", _CONDITION_LINES)


def _seen(cluster: LocalCluster) -> demojudge.Seen:
    import json

    out = cluster.kubectl("get", "pg", "-n", NAMESPACE, "-o", "json").stdout
    group = next((g for g in json.loads(out)["items"] if g["metadata"]["name"] == "nginx"), None)
    return demojudge.observe(_pods(cluster), group)


def run_case(cluster: LocalCluster, work: Path, min_member: int, settle: float) -> demojudge.Verdict:
    """Apply the example with ``min_member``, wait (at most about a minute) for the promised
    outcome, show what kubectl shows and return the verdict on what was seen."""
    _banner(f"PodGroup nginx, minMember {min_member}; ReplicaSet nginx, 6 pods x 3 CPU; one node of 10 CPU")
    _apply(cluster, example.pod_group("nginx", min_member, namespace=NAMESPACE),
           example.replica_set("nginx", 6, namespace=NAMESPACE, group="nginx"), path=work / f"example-{min_member}.yaml")
    if min_member > 3:
        _wait(lambda: len(_pods(cluster)) == 6, 30)
        time.sleep(settle)  # long enough to see that nothing is released
    # The status follows the pods by a write or two: judge once the promise is seen, or at the deadline.
    _wait(lambda: demojudge.judge(min_member, _seen(cluster)).ok, 45)
    _show(cluster)
    verdict = demojudge.judge(min_member, _seen(cluster))
    print("\n" + "\n".join(verdict.lines))
    return verdict


#: What the README promises for each case, printed only when the cluster showed it.
PROMISES = {
    3: "the group fits: the gates of the 3 members with room were removed together and they run; the 3 "
       "without room stay Pending, gated, and the PodGroup says they wait for capacity.",
    4: "only 3 of 4 fit: nothing was released; all 6 pods wait behind the scheduling gate, bound to no node.",
}


def _ensure_binaries(tools: list[str]) -> None:
    """One line when every binary is cached (as after ``make binaries``); else build, per-tool lines.

    Raises :class:`build.BuildError` when a Go build fails.
    """
    missing = [t for t in tools if not all((build.bin_dir(t) / n).is_file() for n in versions.BINARIES[t])]
    if not missing:
        print(f"control plane binaries: cached in {build.cache_dir() / 'bin'}", flush=True)
        return
    _banner(f"building {', '.join(missing)} from pinned Go modules (once; cached in {build.cache_dir() / 'bin'})")
    build.ensure_binaries(tools)


def cleanup(cluster: LocalCluster) -> None:
    cluster.kubectl("delete", "replicaset,pg", "--all", "-n", NAMESPACE, "--wait=true")
    _wait(lambda: not _pods(cluster), 60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cogate demo",
        description="Start a throwaway local Kubernetes control plane with cogate, run the README example "
                    "(6 pods, one node, minMember 3 then 4), print what kubectl shows, then tear it all down.",
    )
    parser.add_argument("--settle", metavar="SECONDS", type=float, default=8.0,
                        help="how long to watch the minMember 4 case stay gated before printing "
                             "(default: %(default)s)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (logs, kubeconfig) after the demo (default: off)")
    args = parser.parse_args(argv)

    try:
        _ensure_binaries(list(versions.CONTROL_PLANE_TOOLS))
    except build.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="cogate-demo-"))
    cluster = LocalCluster(workdir=work / "cluster", keep=args.keep)
    stack = None
    try:
        _banner("starting kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok")
        t0 = time.monotonic()
        cluster.start()
        print(f"control plane ready in {time.monotonic() - t0:.1f}s; "
              f"the kubectl commands below run with KUBECONFIG={cluster.kubeconfig}")
        fake_nodes.add_nodes(cluster, 1, prefix="node-", kwok_taint=False, **example.NODE_SHAPE)
        stack = CogateStack(cluster, work / "cogate").start()
        print("cogate webhook and controller running; PodGroup CRD installed")
        cluster.kubectl("create", "namespace", NAMESPACE)
        _run_shown(cluster, "get", "nodes", "-o", "custom-columns=NAME:.metadata.name,"
                   "CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,PODS:.status.allocatable.pods")
        failed = []
        for min_member in (3, 4):
            if min_member != 3:
                cleanup(cluster)
            verdict = run_case(cluster, work, min_member, args.settle)
            print(f"=> {PROMISES[min_member]}" if verdict.ok
                  else f"=> minMember {min_member}: the cluster did not show what the README promises (above)")
            if not verdict.ok:
                failed.append(min_member)
        if failed:
            print(f"error: the demo did not show the promised outcome for minMember "
                  f"{' and '.join(map(str, failed))}; keep the logs with --keep", file=sys.stderr)
            return 1
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted; tearing down", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a demo reports and tears down
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if stack is not None:
            stack.stop()
        cluster.stop()
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
