"""Structure of the PodGroup CRD (charts/cogate/crds/scheduling.x-k8s.io_podgroups.yaml).

The reference is kubernetes-sigs/scheduler-plugins' PodGroup CRD
(manifests/coscheduling/crd.yaml, v1alpha1): every field it declares must exist here
with the same type and format, so a manifest written for scheduler-plugins applies
unchanged. The API-server behaviour (refusals naming the field) is covered by the e2e
suite; here the schema is checked for being structural and for the validation rules
that produce those refusals.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cogate import api

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "charts" / "cogate" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"

#: scheduler-plugins v1alpha1 PodGroup: (path, type, format or None).
SCHEDULER_PLUGINS_FIELDS = [
    ("spec.minMember", "integer", "int32"),
    ("spec.minResources", "object", None),
    ("spec.scheduleTimeoutSeconds", "integer", "int32"),
    ("status.phase", "string", None),
    ("status.running", "integer", "int32"),
    ("status.succeeded", "integer", "int32"),
    ("status.failed", "integer", "int32"),
    ("status.scheduleStartTime", "string", "date-time"),
    ("status.occupiedBy", "string", None),
]

QUANTITY_OK = ["1", "100m", "1.5", "2Gi", "512Mi", "1e3", "+4", ".5", "10k", "3E"]
QUANTITY_BAD = ["", "abc", "1 Gi", "1GiB", "--1", "1.2.3", "Gi", "1mi"]


@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD_PATH.read_text())


@pytest.fixture(scope="module")
def version(crd) -> dict:
    (v,) = crd["spec"]["versions"]
    return v


@pytest.fixture(scope="module")
def schema(version) -> dict:
    return version["schema"]["openAPIV3Schema"]


def _node(schema: dict, dotted: str) -> dict:
    node = schema
    for part in dotted.split("."):
        assert "properties" in node and part in node["properties"], f"missing field {dotted} (at {part})"
        node = node["properties"][part]
    return node


def test_names_scope_and_group_match_api_constants(crd):
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{api.PLURAL}.{api.GROUP}"
    assert spec["group"] == api.GROUP
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == api.KIND
    assert spec["names"]["plural"] == api.PLURAL
    assert spec["names"]["singular"] == api.SINGULAR
    assert tuple(spec["names"]["shortNames"]) == api.SHORT_NAMES


def test_single_served_storage_version_with_status_subresource(version):
    assert version["name"] == api.VERSION
    assert version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}


#: Fields whose ``format: int32`` cogate leaves out (docs/semantics.md "Departures from
#: scheduler-plugins' schema"): the API server's format check reports an out-of-range value without
#: a field ("<nil>: Invalid value"); ``maximum: 2147483647`` refuses the same values naming the field.
INT32_BY_MAXIMUM = {"spec.minMember", "spec.scheduleTimeoutSeconds"}


@pytest.mark.parametrize("path,typ,fmt", SCHEDULER_PLUGINS_FIELDS)
def test_every_scheduler_plugins_field_present_with_same_type(schema, path, typ, fmt):
    node = _node(schema, path)
    assert node["type"] == typ
    if path in INT32_BY_MAXIMUM:
        assert "format" not in node and node["maximum"] == 2**31 - 1
    else:
        assert node.get("format") == fmt


def test_cogate_status_additions(schema):
    assert _node(schema, "status.scheduled")["type"] == "integer"
    cond = _node(schema, "status.conditions")
    assert cond["type"] == "array"
    assert cond["x-kubernetes-list-type"] == "map"
    assert cond["x-kubernetes-list-map-keys"] == ["type"]
    item = cond["items"]
    # metav1.Condition
    assert set(item["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert set(item["properties"]) == {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    reason = re.compile(item["properties"]["reason"]["pattern"])
    for ok in ("InsufficientCapacity", "TimedOut", "WaitingForMembers"):
        assert reason.fullmatch(ok)
    assert not reason.fullmatch("not a reason")


def test_spec_validation_rules(schema):
    spec = _node(schema, "spec")
    assert spec["properties"]["minMember"]["minimum"] == 1
    assert spec["properties"]["minMember"]["default"] == 1
    assert spec["properties"]["scheduleTimeoutSeconds"]["minimum"] == 0
    # spec defaults to {} so minMember's default applies to an object without spec.
    assert spec["default"] == {}
    mr = spec["properties"]["minResources"]["additionalProperties"]
    assert mr["x-kubernetes-int-or-string"] is True
    assert mr["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_name_length_rule_at_the_root(schema):
    """Issue 9 item 8: a PodGroup name must fit a label value (63 characters), or no member
    could ever name the group. A CEL rule at the schema root may read metadata.name."""
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["rule"] == f"self.metadata.name.size() <= {api.POD_GROUP_NAME_MAX_LENGTH}"
    assert api.POD_GROUP_NAME_MAX_LENGTH == 63
    assert "63 characters" in rule["message"] and api.POD_GROUP_LABEL in " ".join(rule["message"].split())
    assert rule["reason"] == "FieldValueInvalid"
    # the API server names the field only with fieldPath, which must point into the schema
    assert rule["fieldPath"] == ".metadata.name"
    assert _node(schema, "metadata.name") == {"type": "string"}


@pytest.mark.parametrize("text", QUANTITY_OK)
def test_quantity_pattern_accepts(schema, text):
    pattern = _node(schema, "spec.minResources")["additionalProperties"]["pattern"]
    assert re.search(pattern, text), text


@pytest.mark.parametrize("text", QUANTITY_BAD)
def test_quantity_pattern_refuses(schema, text):
    pattern = _node(schema, "spec.minResources")["additionalProperties"]["pattern"]
    assert not re.search(pattern, text), text


def _walk(node: dict, path: str):
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def test_schema_is_structural(schema):
    """Every node has a type (or is int-or-string); no forbidden structural keywords."""
    for path, node in _walk(schema, "$"):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        for forbidden in ("$ref", "additionalItems", "definitions", "dependencies", "patternProperties"):
            assert forbidden not in node, f"{path} uses {forbidden}"
        if "properties" in node and "additionalProperties" in node:
            pytest.fail(f"{path} has both properties and additionalProperties")


def test_printer_columns(version):
    cols = {c["name"]: c for c in version["additionalPrinterColumns"]}
    default = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) == 0]
    assert default == ["Phase", "MinMember", "Scheduled", "Running", "Succeeded", "Failed", "Reason", "Age"]
    assert cols["Timeout"]["priority"] == 1 and cols["Message"]["priority"] == 1
    # the Released condition's (the one cogate always writes; controller/status/conditions.py)
    assert cols["Reason"]["jsonPath"] == '.status.conditions[?(@.type=="Released")].reason'
    assert cols["Message"]["jsonPath"] == '.status.conditions[?(@.type=="Released")].message'
    assert cols["Timeout"]["jsonPath"] == ".spec.scheduleTimeoutSeconds"
    assert cols["Age"]["type"] == "date"
    for name, path in [("Phase", ".status.phase"), ("MinMember", ".spec.minMember"),
                       ("Scheduled", ".status.scheduled"), ("Running", ".status.running")]:
        assert cols[name]["jsonPath"] == path
