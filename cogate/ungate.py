"""``cogate ungate``: remove cogate's scheduling gate from pods (or delete them) without the controller.

For when the controller cannot or should not do it: before ``helm uninstall`` (the chart's
pre-delete hook runs ``cogate ungate --all --webhook-configuration NAME``; without it, pods gated
then would stay ``SchedulingGated`` for ever, since nothing else removes the gate), a PodGroup the
controller cannot read (``InvalidObject``), or a controller that is down. A group the controller
reads is better force-released with the annotation ``cogate.dev/force-release=true``
(docs/troubleshooting.md).

What it does, in order:

1. With ``--webhook-configuration NAME``: read the MutatingWebhookConfiguration's largest
   ``timeoutSeconds`` and delete it, so no pod created from then on is gated (absent: nothing to do).
   With ``--admission-policy-binding NAME`` (repeatable; chart ``admission.mode: policy``): delete
   that MutatingAdmissionPolicyBinding, so kube-apiserver stops gating (absent: nothing to do).
2. List the pods carrying the gate (``--gate-name``; only that gate: others' gates stay) in the
   namespace(s) asked, and remove the gate from each with a JSON Patch (``test`` the gate's name at
   its index, then ``remove`` it: :func:`cogate.gates.remove`; a pod changed meanwhile is read and
   patched again), or delete it (``--delete``; its owner, if any, makes it again, ungated now).
3. After step 1, a pod whose admission was in flight when the configuration went may still be
   stored gated (the API server called the webhook before the deletion, and stores the pod up to
   ``timeoutSeconds`` later): wait ``--settle`` seconds (default: that ``timeoutSeconds``; after a
   policy binding only, :data:`POLICY_SETTLE`: kube-apiserver applies policy changes from a watch,
   typically well under a second later) and sweep once more. Without step 1, one sweep.

``--dry-run`` sends every write with ``dryRun=All`` (nothing changes, the API server still
validates it) and leaves the webhook configuration in place; the summary says what would happen.
The summary names each pod (at most 20, then a count) and ends with one line of counts.

Exit codes: 0 every gate removed (or nothing gated), 1 a pod could not be ungated or deleted, or
the API server could not be reached; 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cogate import api, cliargs, gates, kube, logs

__all__ = ["main", "Sweep", "sweep", "disable_webhook", "gated_pods"]

log = logging.getLogger("cogate.ungate")

#: Patch attempts per pod (a pod changed between list and patch is read and patched again).
ATTEMPTS = 5
#: Most pods a summary names one by one.
SHOWN = 20
#: The longest ``--settle`` wait taken from a webhook configuration (the API's own limit on
#: ``timeoutSeconds`` is 30).
MAX_SETTLE = 30.0
#: Seconds to wait before the last sweep after deleting a MutatingAdmissionPolicyBinding (no webhook
#: timeout bounds an admission in flight then: kube-apiserver sees the deletion through its informer).
POLICY_SETTLE = 5.0


@dataclass
class Sweep:
    """What a sweep did: pods as ``namespace/name``."""

    done: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def add(self, other: "Sweep") -> None:
        self.done += other.done
        self.gone += other.gone
        self.failed.update(other.failed)


def gated_pods(pods: Iterable[Mapping[str, Any]], gate: str) -> list[Mapping[str, Any]]:
    """The pods (API JSON) carrying ``gate`` and not being deleted, sorted by namespace and name."""
    out = [p for p in pods if gates.find(p, gate) is not None and not (p.get("metadata") or {}).get("deletionTimestamp")]
    return sorted(out, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"].get("name", "")))


def _conflict(exc: BaseException) -> bool:
    return kube.api_status(exc) in (409, 422)


def _list(core: Any, namespace: str | None) -> list[dict[str, Any]]:
    if namespace:
        resp = core.list_namespaced_pod(namespace, _preload_content=False)
    else:
        resp = core.list_pod_for_all_namespaces(_preload_content=False)
    return list(kube.json_body(resp).get("items") or [])


def _ungate_one(core: Any, pod: Mapping[str, Any], gate: str, dry_run: bool) -> bool:
    """Remove ``gate`` from ``pod``; False when it no longer carries it (or is gone)."""
    meta = pod["metadata"]
    state = {"pod": pod}

    def attempt() -> bool:
        ops = gates.remove(state["pod"], gate)
        if ops is None:
            return False
        try:
            core.patch_namespaced_pod(meta["name"], meta["namespace"], ops,
                                      _content_type="application/json-patch+json",
                                      **({"dry_run": "All"} if dry_run else {}))
        except Exception as exc:
            if _conflict(exc):  # changed meanwhile: read it again, build the patch again
                state["pod"] = kube.json_body(core.read_namespaced_pod(meta["name"], meta["namespace"],
                                                                       _preload_content=False))
            raise
        return True

    return kube.retrying(attempt, attempts=ATTEMPTS, again=_conflict, backoff=kube.Backoff())


def sweep(core: Any, namespaces: Iterable[str | None], gate: str, *, delete: bool = False,
          dry_run: bool = False) -> Sweep:
    """One pass over ``namespaces`` (``None``: every namespace): ungate (or delete) each gated pod."""
    out = Sweep()
    for ns in namespaces:
        for pod in gated_pods(_list(core, ns), gate):
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            try:
                if delete:
                    core.delete_namespaced_pod(pod["metadata"]["name"], pod["metadata"]["namespace"],
                                               **({"dry_run": "All"} if dry_run else {}))
                    out.done.append(key)
                elif _ungate_one(core, pod, gate, dry_run):
                    out.done.append(key)
                else:
                    out.gone.append(key)
            except Exception as exc:  # noqa: BLE001  (reported per pod; the others go on)
                if kube.api_status(exc) == 404:
                    out.gone.append(key)
                else:
                    out.failed[key] = _answer(exc)
    return out


def _answer(exc: BaseException) -> str:
    status = kube.api_status(exc)
    reason = getattr(exc, "reason", "") or type(exc).__name__
    return f"HTTP {status} {reason}" if status else f"{reason}: {exc}"


def disable_webhook(admission: Any, name: str, *, dry_run: bool = False) -> float | None:
    """Delete MutatingWebhookConfiguration ``name``; its largest ``timeoutSeconds`` (seconds, the
    API default 10 when unset), or ``None`` when it does not exist. ``dry_run``: read only."""
    try:
        obj = kube.json_body(admission.read_mutating_webhook_configuration(name, _preload_content=False))
    except Exception as exc:
        if kube.api_status(exc) == 404:
            return None
        raise
    timeout = max((float(w.get("timeoutSeconds") or 10) for w in obj.get("webhooks") or []), default=0.0)
    if not dry_run:
        try:
            admission.delete_mutating_webhook_configuration(name)
        except Exception as exc:
            if kube.api_status(exc) != 404:
                raise
    return timeout


def disable_policy_binding(admission: Any, name: str, *, dry_run: bool = False) -> bool:
    """Delete MutatingAdmissionPolicyBinding ``name`` (``admissionregistration.k8s.io/v1``); False when it
    does not exist (or the API server serves no such kind). ``dry_run``: read only."""
    try:
        admission.read_mutating_admission_policy_binding(name, _preload_content=False)
        if not dry_run:
            admission.delete_mutating_admission_policy_binding(name)
    except Exception as exc:
        if kube.api_status(exc) == 404:
            return False
        raise
    return True


def _summary(result: Sweep, delete: bool, dry_run: bool) -> list[str]:
    verb = ("would delete" if dry_run else "deleted") if delete else ("would ungate" if dry_run else "ungated")
    lines = [f"{verb} {p}" for p in result.done[:SHOWN]]
    if len(result.done) > SHOWN:
        lines.append(f"... and {len(result.done) - SHOWN} more")
    lines += [f"failed {p}: {why}" for p, why in sorted(result.failed.items())]
    lines.append(f"cogate ungate: {verb} {len(result.done)} pods; {len(result.gone)} already ungated or gone; "
                 f"{len(result.failed)} failed")
    return lines


#: ``--help``'s description (plain text).
DESCRIPTION = ("Remove cogate's scheduling gate from gated pods (or delete them) without the controller: before "
               "helm uninstall, for a PodGroup the controller cannot read, or while the controller is down.")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cogate ungate", description=DESCRIPTION)
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all", action="store_true",
                       help="every pod carrying the gate, in --namespace or else in every namespace "
                            "(required unless --group)")
    scope.add_argument("--group", metavar="NAME",
                       help="only members of PodGroup NAME (label scheduling.x-k8s.io/pod-group) in --namespace "
                            "(required unless --all)")
    p.add_argument("-n", "--namespace", default="", metavar="NAMESPACE",
                   help="one namespace; needed with --group (default: every namespace)")
    p.add_argument("--delete", action="store_true",
                   help="delete the gated pods instead of removing the gate (default: off)")
    p.add_argument("--dry-run", action="store_true",
                   help="send every write with dryRun=All and leave the webhook configuration; change nothing "
                        "(default: off)")
    p.add_argument("--gate-name", default=api.DEFAULT_GATE_NAME, type=cliargs.gate_name, metavar="NAME",
                   help=f"the gate to remove, the chart's gateName (default: {api.DEFAULT_GATE_NAME})")
    p.add_argument("--webhook-configuration", metavar="NAME", default="",
                   help="delete this MutatingWebhookConfiguration first, so no pod created later is gated "
                        "(default: none)")
    p.add_argument("--admission-policy-binding", metavar="NAME", action="append", default=[],
                   help="delete this MutatingAdmissionPolicyBinding first (chart admission.mode policy), so no "
                        "pod created later is gated; repeatable (default: none)")
    p.add_argument("--settle", type=cliargs.seconds, default=None, metavar="SECONDS",
                   help="wait before the last sweep after deleting the webhook configuration, for admissions in "
                        f"flight (default: its largest timeoutSeconds, at most {MAX_SETTLE:.0f})")
    p.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="kubeconfig file (default: $KUBECONFIG, then the in-cluster service account)")
    cliargs.add_log_flags(p)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if args.group and not args.namespace:
        p.error("--group needs --namespace")
    return args


def main(argv: list[str] | None = None, *, apis: tuple[Any, Any] | None = None,
         sleep: Callable[[float], None] = time.sleep) -> int:
    """``cogate ungate``; ``apis``: ``(CoreV1Api, AdmissionregistrationV1Api)`` (tests), else from
    ``--kubeconfig``. Returns the exit code (module doc)."""
    args = parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    try:
        if apis is None:
            from kubernetes import client as k8s

            api_client = kube.api_client(args.kubeconfig)
            apis = (k8s.CoreV1Api(api_client), k8s.AdmissionregistrationV1Api(api_client))
        core, admission = apis
        settle = None
        if args.webhook_configuration:
            timeout = disable_webhook(admission, args.webhook_configuration, dry_run=args.dry_run)
            state = "absent" if timeout is None else ("would be deleted" if args.dry_run else "deleted")
            print(f"MutatingWebhookConfiguration {args.webhook_configuration}: {state}")
            if timeout is not None and not args.dry_run:
                settle = min(timeout, MAX_SETTLE) if args.settle is None else args.settle
        for name in args.admission_policy_binding:
            found = disable_policy_binding(admission, name, dry_run=args.dry_run)
            state = "absent" if not found else ("would be deleted" if args.dry_run else "deleted")
            print(f"MutatingAdmissionPolicyBinding {name}: {state}")
            if found and not args.dry_run:
                settle = max(settle or 0.0, POLICY_SETTLE if args.settle is None else args.settle)
        namespaces = [args.namespace or None]
        if args.group:
            result = _sweep_group(core, args)
        else:
            result = sweep(core, namespaces, args.gate_name, delete=args.delete, dry_run=args.dry_run)
            if settle:  # admissions in flight when the configuration went: stored gated up to timeoutSeconds later
                sleep(settle)
                result.add(sweep(core, namespaces, args.gate_name, delete=args.delete, dry_run=args.dry_run))
    except Exception as exc:  # noqa: BLE001  (the API server could not be asked: say so, exit 1)
        print(f"cogate ungate: {_answer(exc)}", file=sys.stderr)
        return 1
    for line in _summary(result, args.delete, args.dry_run):
        print(line)
    return 1 if result.failed else 0


def _sweep_group(core: Any, args: argparse.Namespace) -> Sweep:
    """:func:`sweep` of the members of PodGroup ``args.group`` in ``args.namespace`` only."""

    class OneGroup:  # the pods API narrowed to the group's label
        def __getattr__(self, name: str) -> Any:
            return getattr(core, name)

        def list_namespaced_pod(self, namespace: str, **kw: Any) -> Any:
            return core.list_namespaced_pod(namespace, label_selector=f"{api.POD_GROUP_LABEL}={args.group}", **kw)

    return sweep(OneGroup(), [args.namespace], args.gate_name, delete=args.delete, dry_run=args.dry_run)
