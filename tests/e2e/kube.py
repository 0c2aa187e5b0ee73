"""Small helpers for end-to-end tests: polling, pod states, raw API reads."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any, Callable, Iterator

from kubernetes import client

from cogate.api import GROUP, PLURAL, POD_GROUP_LABEL, VERSION


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.1, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value; raise AssertionError naming ``what`` on timeout.

    The controller writes status counts, condition messages and events in several steps (a message's
    numbers at most every second, events after the status): put everything asserted right after the
    wait into ``predicate`` and assert on the value it returns. A check that something never happens
    stays a check after a sufficient wait (:func:`hold_gated`)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
        time.sleep(interval)


def pods(api: client.ApiClient, namespace: str, selector: str | None = None) -> list[client.V1Pod]:
    return client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items


def gated(pod: client.V1Pod) -> bool:
    return bool(pod.spec.scheduling_gates)


def bound(pod: client.V1Pod) -> bool:
    return bool(pod.spec.node_name)


def running(pod: client.V1Pod) -> bool:
    return bool(pod.spec.node_name) and pod.status.phase == "Running"


def scheduled_reason(pod: client.V1Pod) -> str | None:
    """Reason of the PodScheduled condition (``SchedulingGated``, ``Unschedulable``) or None."""
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled":
            return cond.reason
    return None


def scheduled_by_default_scheduler(api: client.ApiClient, namespace: str) -> set[str]:
    """Names of the pods in ``namespace`` with a ``Scheduled`` event from kube-scheduler's
    ``default-scheduler`` profile (bound by it, not by anyone setting nodeName). Its event
    broadcaster writes them asynchronously, a moment after the binding: wait for them."""
    events = client.CoreV1Api(api).list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    return {e.involved_object.name for e in events
            if (e.reporting_component or e.source.component) == "default-scheduler"}


def get_pod_group(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def create_pod_group(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    return client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def events_for(api: client.ApiClient, namespace: str, name: str, kind: str = "PodGroup") -> list[client.CoreV1Event]:
    sel = f"involvedObject.name={name},involvedObject.kind={kind}"
    return client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=sel).items


def group_pods(api: client.ApiClient, namespace: str, group: str, *, deleting: bool = True) -> list[client.V1Pod]:
    """Pods labelled for PodGroup ``group``; ``deleting=False`` leaves out pods being deleted."""
    ps = pods(api, namespace, f"{POD_GROUP_LABEL}={group}")
    return ps if deleting else [p for p in ps if not p.metadata.deletion_timestamp]


def status(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """The PodGroup's ``status`` (``{}`` before the controller wrote one)."""
    return get_pod_group(api, namespace, name).get("status") or {}


def condition(st: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` in a PodGroup status, or None."""
    return next((c for c in st.get("conditions") or [] if c.get("type") == type_), None)


def hold_gated(api: client.ApiClient, namespace: str, group: str, seconds: float, count: int) -> None:
    """Assert for ``seconds`` that the group has ``count`` members, all gated and unbound
    (a member released early would leave the group half-placed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ps = group_pods(api, namespace, group)
        assert len(ps) == count
        for p in ps:
            assert gated(p) and not bound(p), f"{p.metadata.name} left the gate"
        time.sleep(0.3)


def webhook_requests(stack) -> dict[str, float]:
    """The webhook's ``cogate_webhook_requests_total`` by outcome (``gated``, ``ignored``, ...),
    read from its /metrics."""
    out: dict[str, float] = {}
    for line in stack.metrics("webhook").splitlines():
        if line.startswith("cogate_webhook_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('outcome="', 1)[1].split('"', 1)[0]] = float(value)
    return out


@contextlib.contextmanager
def paused(proc) -> Iterator[None]:
    """Process ``proc`` (a ``localcluster.procs.Proc``) stopped (SIGSTOP) inside the block, continued
    (SIGCONT) after it."""
    proc.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        proc.signal(signal.SIGCONT)


def scheduler_paused(stack) -> contextlib.AbstractContextManager[None]:
    """kube-scheduler :func:`paused`: released members stay pinned and unbound meanwhile."""
    return paused(stack.cluster.procs["kube-scheduler"])


def controller_paused(stack) -> contextlib.AbstractContextManager[None]:
    """cogate's controller :func:`paused`."""
    return paused(stack.processes["controller"])


@contextlib.contextmanager
def controller_flags(stack, *flags: str) -> Iterator[None]:
    """Run the controller with extra flags inside the block; back to the session's flags after."""
    saved = stack.controller_args
    stack.controller_args = tuple(saved) + flags
    stack.restart_controller()
    try:
        yield
    finally:
        stack.controller_args = saved
        stack.restart_controller()


@contextlib.contextmanager
def priority_classes(kube, **values: int | tuple[int, str]) -> Iterator[dict[str, str]]:
    """PriorityClasses for one test: ``name=value`` or ``name=(value, preemptionPolicy)``; yields
    ``name -> unique class name`` (a suffix keeps tests apart); deleted afterwards."""
    sched = client.SchedulingV1Api(kube)
    suffix = f"{time.monotonic_ns() % 10**8}"
    names = {k: f"{k}-{suffix}" for k in values}
    for k, v in values.items():
        value, policy = v if isinstance(v, tuple) else (v, None)
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": names[k]}, "value": value}
        if policy:
            body["preemptionPolicy"] = policy
        sched.create_priority_class(body)
    try:
        yield names
    finally:
        for n in names.values():
            with contextlib.suppress(client.ApiException):
                sched.delete_priority_class(n)
