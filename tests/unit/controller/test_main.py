"""``cogate controller``'s wiring (issue 28): which informers ``main()`` builds for which flags, with
which list/watch calls (API, method, selectors), keys and converters, in which order they start,
and what they are connected to. The API server is replaced by recording fakes of the client's
typed APIs; the reconcile loop by a stand-in that stops the process at once."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace as Obj

import pytest

from cogate import api
from cogate.controller import main as controller_main
from cogate.controller.devices import records as devices
from cogate.controller.kube import informer
from cogate.controller.model import quota, records, volumes
from cogate.controller.preemption import budgets, inflight
from cogate.controller.model import nativegroups
from cogate.controller.provisioning import provreq
from cogate.controller.status.inputs import group_object
from cogate.controller.topology import constraints as t

ALL_V1 = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
          "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"]
EMPTY_LIST = json.dumps({"items": [], "metadata": {"resourceVersion": "7"}}).encode()


class ApiError(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status = status


class World:
    """The fakes' shared record: every ``list_*`` call (API class, method, keyword arguments), the
    informers started in order, and the API answers to the controller's availability checks."""

    def __init__(self, served_crds=("resourceslices",)):
        self.calls: list[tuple[str, str, dict]] = []
        self.served = set(served_crds)
        #: ``group/version/plural`` whose availability check RBAC refuses (403)
        self.refused = ""
        self.started: list[str] = []
        self.caches = None
        self.reconciler = None

    def api(self, kind):
        world = self

        class Fake:
            def __init__(self, api_client=None):
                self.api_client_given = api_client

            def __getattr__(self, name):
                if not name.startswith("list_"):
                    raise AttributeError(name)

                def call(*args, **kwargs):
                    if args:  # the availability checks: (group, version, plural)
                        kwargs = {**dict(zip(("group", "version", "plural"), args)), **kwargs}
                    world.calls.append((kind, name, kwargs))
                    full = f"{kwargs.get('group')}/{kwargs.get('version')}/{kwargs.get('plural')}"
                    if kwargs.get("limit") == 1 and world.refused == full:
                        raise ApiError(403)
                    if (kwargs.get("limit") == 1 and kwargs.get("plural") not in world.served
                            and full not in world.served):
                        raise ApiError(404)
                    return Obj(data=EMPTY_LIST)
                return call

        Fake.__name__ = kind
        return Fake


@pytest.fixture
def world(monkeypatch):
    from kubernetes import client

    w = World()
    monkeypatch.setattr(controller_main.kube, "api_client", lambda path, pool_size=None: Obj(pool_size=pool_size))
    for kind in ("CoreV1Api", "CustomObjectsApi", "PolicyV1Api", "CoordinationV1Api", "AdmissionregistrationV1Api"):
        monkeypatch.setattr(client, kind, w.api(kind))

    class Group:
        def __init__(self, api_client):
            pass

        def get_api_group(self):
            return Obj(versions=[Obj(version="v1")])

    class Resources:
        def __init__(self, api_client):
            pass

        def get_api_resources(self):
            return Obj(resources=[Obj(name=n) for n in ALL_V1])

    monkeypatch.setattr(client, "AdmissionregistrationApi", Group)
    monkeypatch.setattr(client, "AdmissionregistrationV1Api", type("AdmissionregistrationV1Api",
                                                                   (w.api("AdmissionregistrationV1Api"), Resources), {}))
    monkeypatch.setattr(informer.Informer, "start", lambda self, stop: w.started.append(self.name))
    monkeypatch.setattr(controller_main, "serve",
                        lambda port, metrics, ready, host: Obj(server_port=port, shutdown=lambda: None))
    monkeypatch.setattr(controller_main.signal, "signal", lambda *a: None)

    def stand_in(reconciler, caches, stop, leading):
        w.caches, w.reconciler = caches, reconciler
        stop.set()

    monkeypatch.setattr(controller_main, "_reconcile_when_synced", stand_in)
    return w


def run(world, *flags):
    assert controller_main.main(["--no-leader-elect", "--metrics-port", "0", *flags]) == 0
    return world.caches


def listed(world, inf):
    """The one ``list_*`` call an informer's list makes: (API class, method, keyword arguments)."""
    world.calls.clear()
    inf._list()
    [(kind, method, kwargs)] = world.calls
    kwargs = {k: v for k, v in kwargs.items() if k not in ("limit", "_preload_content", "_request_timeout")}
    return kind, method, kwargs


BOUND = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
UNBOUND = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
DRA = {"group": "resource.k8s.io", "version": "v1"}


def expected(namespace=None):
    """The informers of a default run (``--preemption`` on, devices served), by Caches field:
    name, list call, key, converter."""
    ns = {"namespace": namespace} if namespace else {}
    scoped = "list_namespaced_custom_object" if namespace else "list_cluster_custom_object"
    pods = "list_namespaced_pod" if namespace else "list_pod_for_all_namespaces"
    return {
        "podgroups": ("podgroups", ("CustomObjectsApi", scoped,
                                    {"group": api.GROUP, "version": api.VERSION, **ns, "plural": api.PLURAL}),
                      informer.namespaced_key, group_object),
        "members": ("members", ("CoreV1Api", pods, {"label_selector": api.POD_GROUP_LABEL, **ns}),
                    informer.uid_key, records.pod_info),
        "bound": ("bound-pods", ("CoreV1Api", "list_pod_for_all_namespaces", {"field_selector": BOUND}),
                  informer.uid_key, records.pod_info),
        "nodes": ("nodes", ("CoreV1Api", "list_node", {}), informer.name_key, records.node_info),
        "claims": ("persistentvolumeclaims",
                   ("CoreV1Api", "list_namespaced_persistent_volume_claim" if namespace
                    else "list_persistent_volume_claim_for_all_namespaces", ns),
                   informer.namespaced_key, volumes.claim_info),
        "volumes": ("persistentvolumes", ("CoreV1Api", "list_persistent_volume", {}), informer.name_key,
                    volumes.volume_info),
        "quotas": ("resourcequotas", ("CoreV1Api", "list_namespaced_resource_quota" if namespace
                                      else "list_resource_quota_for_all_namespaces", ns),
                   informer.namespaced_key, quota.quota_info),
        "nominated": ("nominated-pods", ("CoreV1Api", "list_pod_for_all_namespaces",
                                         {"label_selector": f"!{api.POD_GROUP_LABEL}", "field_selector": UNBOUND}),
                      informer.uid_key, records.nominated_pod_info),
        "budgets": ("poddisruptionbudgets", ("PolicyV1Api", "list_namespaced_pod_disruption_budget" if namespace
                                             else "list_pod_disruption_budget_for_all_namespaces", ns),
                    informer.namespaced_key, budgets.budget_info),
        "resource_slices": ("resourceslices", ("CustomObjectsApi", "list_cluster_custom_object",
                                               {**DRA, "plural": "resourceslices"}),
                            informer.name_key, devices.slice_info),
        "device_classes": ("deviceclasses", ("CustomObjectsApi", "list_cluster_custom_object",
                                             {**DRA, "plural": "deviceclasses"}),
                           informer.name_key, devices.device_class_info),
        "resource_claims": ("resourceclaims", ("CustomObjectsApi", scoped, {**DRA, **ns, "plural": "resourceclaims"}),
                            informer.namespaced_key, devices.device_claim_info),
        "claim_templates": ("resourceclaimtemplates", ("CustomObjectsApi", scoped,
                                                       {**DRA, **ns, "plural": "resourceclaimtemplates"}),
                            informer.namespaced_key, devices.claim_template_info),
    }


ORDER = ["podgroups", "members", "bound-pods", "nodes", "persistentvolumeclaims", "persistentvolumes",
         "resourcequotas", "nominated-pods", "poddisruptionbudgets", "resourceslices", "deviceclasses",
         "resourceclaims", "resourceclaimtemplates"]
KUEUE = "kueue-topologies"
ADMISSION = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
             "mutatingadmissionpolicies"]


def check(world, caches, want):
    got = {f: getattr(caches, f) for f in want}
    for field, (name, call, key, convert) in want.items():
        inf = got[field]
        assert inf is not None, field
        assert (inf.name, listed(world, inf), inf._key, inf._convert) == (name, call, key, convert), field
        assert inf.on_invalid is not None, field
    # Kueue's Topologies, not served by the fake API server: watched until they are (controller/topologies.py)
    assert [i.name for i in caches.all()] == [want[f][0] for f in want] + [KUEUE]
    assert (caches.kueue_topologies._key, caches.kueue_topologies._convert) == (informer.name_key,
                                                                                 t.kueue_topology_levels)


@pytest.mark.parametrize("namespace", [None, "team-a"])
def test_default_run_watches_the_core_preemption_devices_and_admission(world, namespace):
    caches = run(world, *(["--namespace", namespace] if namespace else []))
    check(world, caches, expected(namespace))
    assert caches.provreqs is None
    lease = caches.scheduler_lease
    assert (lease.name, listed(world, lease), lease._key, lease._convert) == (
        "kube-scheduler-lease", ("CoordinationV1Api", "list_namespaced_lease",
                                 {"namespace": inflight.SCHEDULER_LEASE[0],
                                  "field_selector": f"metadata.name={inflight.SCHEDULER_LEASE[1]}"}),
        informer.namespaced_key, inflight.scheduler_lease)
    assert sorted(i.name for i in caches.admission) == sorted(ADMISSION) and caches.admission_known is True
    # started: the readiness informers in Caches.all()'s order, then admission, then the lease
    assert world.started == [*ORDER, KUEUE, *[i.name for i in caches.admission], "kube-scheduler-lease"]
    # connected: members to on_member_event, every other one to enqueue (after the planning state's own)
    handlers = {i.name: [h.__qualname__ for h in i._handlers] for i in (*caches.all(), *caches.admission)}
    assert handlers == {
        "podgroups": ["Reconciler.enqueue"], "members": ["Reconciler.on_member_event"],
        "bound-pods": ["Devices._bound_changed", "Reconciler.on_bound_pod_event", "Reconciler.enqueue"],
        "nodes": ["Reconciler.on_node_event", "Reconciler.enqueue"],
        "persistentvolumeclaims": ["Reconciler.enqueue"], "persistentvolumes": ["Reconciler.enqueue"],
        "resourcequotas": ["Reconciler.enqueue"],
        "nominated-pods": ["Reconciler.on_nominated_pod_event", "Reconciler.enqueue"],
        "poddisruptionbudgets": ["Reconciler.enqueue"],
        "resourceslices": ["Devices._bump", "Reconciler.enqueue"],
        "deviceclasses": ["Devices._bump", "Reconciler.enqueue"],
        "resourceclaims": ["Devices._claim_changed", "Reconciler.enqueue"],
        "resourceclaimtemplates": ["Devices._template_changed", "Reconciler.enqueue"], KUEUE: ["Reconciler.enqueue"],
        **{name: ["Reconciler.enqueue"] for name in ADMISSION}}
    assert all(i.on_invalid is None for i in caches.admission) and lease.on_invalid is None
    # a new kube-scheduler leader: the preemption room hears of it, and a pass follows when it says so
    rec = world.reconciler
    heard = []
    rec.preempting.on_scheduler_lease = lambda *event: heard.append(event) or True
    rec.enqueue = lambda *a: heard.append("pass")
    [on_lease] = lease._handlers
    on_lease("MODIFIED", 1, 2)
    assert heard == [("MODIFIED", 1, 2), "pass"]


def test_invalid_objects_are_counted_and_reported_on_their_group(world):
    caches = run(world)
    rec = world.reconciler
    emitted = []
    rec.events.emit = lambda ref, key, *a, **kw: emitted.append((ref.namespace, ref.name, key))
    caches.podgroups.on_invalid({"metadata": {"namespace": "ns", "name": "pg", "uid": "u"}}, ValueError("bad"))
    caches.members.on_invalid({"metadata": {"namespace": "ns", "name": "p", "uid": "p1",
                                            "labels": {api.POD_GROUP_LABEL: "pg"}}}, ValueError("bad"))
    assert emitted == [("ns", "pg", "invalid-podgroup"), ("ns", "pg", ("invalid", "p1"))]
    for inf in caches.all():
        inf.on_invalid({"metadata": {}}, ValueError("bad"))
        assert rec.metrics.invalid_objects.labels(inf.name)._value.get() == (2 if inf.name in ("podgroups", "members")
                                                                            else 1), inf.name
    assert rec.aftercare.policy is None


def test_pod_disruption_budgets_get_the_policy_api(world):
    run(world, "--pod-disruption-budgets")
    assert type(world.reconciler.aftercare.policy).__name__ == "PolicyV1Api"


def test_flags_turn_features_off(world):
    caches = run(world, "--no-preemption", "--validate-releases", "never")
    want = expected()
    del want["budgets"]
    check(world, caches, want)
    assert caches.scheduler_lease is None and caches.admission == () and caches.admission_known is False
    assert world.started == [n for n in ORDER if n != "poddisruptionbudgets"] + [KUEUE]


def test_devices_not_served_leaves_them_unwatched(world, caplog):
    world.served = set()
    with caplog.at_level(logging.WARNING, "cogate.controller"):
        caches = run(world, "--no-preemption", "--validate-releases", "never")
    assert "DRA devices are not modelled (the API server does not serve resource.k8s.io/v1" in caplog.text
    assert all(getattr(caches, f) is None for f in ("resource_slices", "device_classes", "resource_claims",
                                                      "claim_templates"))
    assert [r.name for r in caplog.records if "DRA" in r.message] == ["cogate.controller"]


def test_provisioning_class_watches_its_requests(world):
    world.served.add(provreq.PLURAL)
    caches = run(world, "--provisioning-class", provreq.ATOMIC_CLASS, "--namespace", "ns")
    inf = caches.provreqs
    assert (inf.name, listed(world, inf), inf._key, inf._convert) == (
        "provisioningrequests", ("CustomObjectsApi", "list_namespaced_custom_object",
                                 {"group": provreq.GROUP, "version": provreq.VERSION, "namespace": "ns",
                                  "plural": provreq.PLURAL, "label_selector": provreq.GROUP_LABEL}),
        informer.namespaced_key, provreq.request_info)
    assert [i.name for i in caches.all()].index("provisioningrequests") == ORDER.index("poddisruptionbudgets") + 1


def test_provisioning_class_without_its_crd_stops_the_controller(world, caplog):
    with caplog.at_level(logging.ERROR, "cogate.controller"):
        assert controller_main.main(["--no-leader-elect", "--provisioning-class", "x"]) == 2
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno == logging.ERROR] == [
        ("cogate.controller", f"--provisioning-class x: the API server does not serve {provreq.API_VERSION} "
                              f"{provreq.PLURAL}: install cluster-autoscaler's ProvisioningRequest CRD first")]
    assert world.started == [] and world.caches is None


def test_checks_and_discovery_run_in_order_before_any_informer_lists(world):
    world.served.add(provreq.PLURAL)
    run(world, "--provisioning-class", provreq.ATOMIC_CLASS)
    checks = [(kw.get("version"), kw.get("plural")) for kind, method, kw in world.calls if kw.get("limit") == 1]
    assert checks == [("v1beta1", "podgroups"), ("v1alpha2", "podgroups"), (provreq.VERSION, provreq.PLURAL),
                      ("v1", "resourceslices"), ("v1beta2", "topologies"), ("v1beta1", "topologies")]  # Kueue


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha2"])
def test_native_pod_groups_are_read_where_served(world, caplog, version):
    """Issue 39: the served ``scheduling.k8s.io`` version is discovered (v1beta1 first), and its
    PodGroups watched with ``--preemption``."""
    world.served.add(f"scheduling.k8s.io/{version}/podgroups")
    with caplog.at_level(logging.INFO, "cogate.controller"):
        caches = run(world, "--namespace", "ns")
    inf = caches.native_groups
    assert (inf.name, listed(world, inf), inf._key, inf._convert) == (
        "native-podgroups", ("CustomObjectsApi", "list_namespaced_custom_object",
                             {"group": "scheduling.k8s.io", "version": version, "namespace": "ns",
                              "plural": "podgroups"}),
        informer.namespaced_key, nativegroups.native_group)
    assert f"reading scheduling.k8s.io/{version} PodGroups" in caplog.text
    assert "native-podgroups" in world.started


def test_native_pod_groups_not_served_or_refused_leave_them_unwatched(world, caplog):
    with caplog.at_level(logging.INFO, "cogate.controller"):
        caches = run(world)
    assert caches.native_groups is None and "native-podgroups" not in world.started
    assert "the API server serves no scheduling.k8s.io PodGroups" in caplog.text
    world.served.add("scheduling.k8s.io/v1beta1/podgroups")
    world.refused = "scheduling.k8s.io/v1beta1/podgroups"
    caplog.clear()
    with caplog.at_level(logging.WARNING, "cogate.controller"):
        caches = run(world)
    assert caches.native_groups is None
    assert "Kubernetes' own PodGroups are not read (RBAC does not let cogate list scheduling.k8s.io/v1beta1 " \
           "podgroups" in caplog.text
    caches = run(world, "--no-preemption")
    assert caches.native_groups is None
