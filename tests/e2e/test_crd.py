"""The PodGroup CRD on a real kube-apiserver: validation, defaults, printer columns, status.

Only the control plane is needed (no cogate processes): the CRD is applied here.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from cogate.api import GROUP, PLURAL, VERSION
from cogate.controller.status.status import compute_status
from cogate.controller.status.writes import status_patch
from cogate.models import PodGroup
from cogate.localcluster.stack import CRD_NAME, crd_path

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def crd(cluster):
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_path()))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    return CRD_NAME


def _pg(namespace: str, name: str, spec: dict | None) -> dict:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace}}
    if spec is not None:
        body["spec"] = spec
    return body


def test_scheduler_plugins_manifest_applies_unchanged(crd, cluster, namespace):
    manifest = f"""
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: nginx
  namespace: {namespace}
spec:
  scheduleTimeoutSeconds: 10
  minMember: 3
  minResources:
    cpu: "3"
    memory: 1Gi
"""
    cluster.kubectl("apply", "-f", "-", input=manifest)
    got = cluster.kubectl("get", "pg", "nginx", "-n", namespace, "-o", "jsonpath={.spec.minMember}").stdout
    assert got == "3"


def test_defaults_min_member(crd, kube, namespace):
    api = client.CustomObjectsApi(kube)
    obj = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _pg(namespace, "bare", None))
    assert obj["spec"] == {"minMember": 1}
    assert PodGroup.from_api(obj).spec.minMember == 1


def _refusal(err: client.ApiException) -> str:
    """The message of the API server's 422 answer (its Status, JSON-decoded: Go escapes ``<``)."""
    assert err.status == 422, err
    return json.loads(err.body)["message"]


@pytest.mark.parametrize("spec,field", [
    ({"minMember": 0}, "spec.minMember"),
    ({"minMember": 3_000_000_000}, "spec.minMember"),  # beyond int32
    ({"minMember": 2, "scheduleTimeoutSeconds": -1}, "spec.scheduleTimeoutSeconds"),
    ({"minMember": 2, "scheduleTimeoutSeconds": 3_000_000_000}, "spec.scheduleTimeoutSeconds"),
    ({"minMember": 2, "minResources": {"cpu": "lots"}}, "spec.minResources.cpu"),
])
def test_invalid_objects_refused_naming_the_field(crd, kube, namespace, spec, field):
    """Every error of the answer names its field: none is "<nil>: Invalid value" (a format: int32
    check would add one for a value beyond int32)."""
    api = client.CustomObjectsApi(kube)
    with pytest.raises(client.ApiException) as err:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _pg(namespace, "bad", spec))
    message = _refusal(err.value)
    assert f"{field}: Invalid value" in message and "<nil>" not in message, message


def test_names_longer_than_a_label_value_are_refused_saying_why(crd, kube, namespace):
    """Issue 9 item 8: a 70-character PodGroup name can never be matched by a member's label
    (63 characters at most): the API server refuses it and says why; 63 is accepted."""
    api = client.CustomObjectsApi(kube)
    with pytest.raises(client.ApiException) as err:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _pg(namespace, "n" * 70, {}))
    message = _refusal(err.value)
    assert "at most 63 characters" in message and "scheduling.x-k8s.io/pod-group" in message
    assert "metadata.name: Invalid value" in message and "<nil>" not in message, message  # the rule's fieldPath
    ok = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _pg(namespace, "n" * 63, {}))
    assert ok["metadata"]["name"] == "n" * 63
    # generateName: the API server generates names of at most 63 characters (58 + 5).
    gen = _pg(namespace, "", {})
    del gen["metadata"]["name"]
    gen["metadata"]["generateName"] = "g" * 62
    made = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gen)
    assert len(made["metadata"]["name"]) <= 63


def test_printer_columns_and_short_names(crd, cluster, kube, namespace):
    client.CustomObjectsApi(kube).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _pg(namespace, "cols", {"minMember": 2, "scheduleTimeoutSeconds": 30}))
    header = cluster.kubectl("get", "pg", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "REASON", "AGE"]
    wide = cluster.kubectl("get", "pgs", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-2:] == ["TIMEOUT", "MESSAGE"]
    timeout_at = wide[0].index("TIMEOUT")  # kubectl aligns columns: TIMEOUT's value starts under it
    assert wide[1][timeout_at:].split()[0] == "30", wide


def test_status_subresource_accepts_computed_status(crd, kube, namespace):
    api = client.CustomObjectsApi(kube)
    obj = api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _pg(namespace, "st", {"minMember": 2}))
    pg = PodGroup.from_api(obj)

    class Verdict:
        outcome, message, fits = "InsufficientCapacity", "fits 1 of 2: cpu short by 500m", 1

    new = compute_status(pg, [], Verdict(), 1_714_557_600.0)
    body = status_patch(obj.get("status"), new)
    assert body is not None
    got = api.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "st", body)
    assert got["status"]["phase"] == "Pending"
    assert got["status"]["conditions"][0]["reason"] == "InsufficientCapacity"
    # the stored status round-trips: nothing left to write
    assert status_patch(got["status"], compute_status(PodGroup.from_api(got), [], Verdict(), 1_714_557_700.0)) is None
    # spec is not writable through /status
    api.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "st",
                                              {"spec": {"minMember": 9}, "status": {"running": 0}})
    assert api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "st")["spec"]["minMember"] == 2
