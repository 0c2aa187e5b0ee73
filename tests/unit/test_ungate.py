"""``cogate ungate`` (cogate/ungate.py) against a fake API that applies the real JSON Patches."""

from __future__ import annotations

import jsonpatch
import pytest

from cogate import ungate
from tests.builders.fakes import ApiError
from tests.builders.objects import GATE, pod

OTHER = "example.com/other"


class Fake:
    """CoreV1Api + AdmissionregistrationV1Api subset: pods by (namespace, name), one webhook configuration."""

    def __init__(self, pods, webhook=None):
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        self.webhook = webhook
        self.log: list[tuple] = []
        self.errors: dict[str, list[Exception]] = {}
        self.on_list = None  # called on each list (a pod admitted in flight appears)

    def _items(self, namespace=None, label_selector=None):
        if self.on_list:
            self.on_list(self)
        out = [p for (ns, _), p in self.pods.items() if namespace in (None, ns)]
        if label_selector:
            k, v = label_selector.split("=")
            out = [p for p in out if p["metadata"].get("labels", {}).get(k) == v]
        return {"items": [jsonpatch.apply_patch(p, []) for p in out]}

    def list_namespaced_pod(self, namespace, label_selector=None, **_):
        self.log.append(("list", namespace))
        return self._items(namespace, label_selector)

    def list_pod_for_all_namespaces(self, **_):
        self.log.append(("list", None))
        return self._items()

    def read_namespaced_pod(self, name, namespace, **_):
        return jsonpatch.apply_patch(self.pods[(namespace, name)], [])

    def patch_namespaced_pod(self, name, namespace, body, **kw):
        assert kw["_content_type"] == "application/json-patch+json"
        errors = self.errors.get(name)
        if errors:
            raise errors.pop(0)
        if (namespace, name) not in self.pods:
            raise ApiError(404)
        try:
            new = jsonpatch.apply_patch(self.pods[(namespace, name)], body)
        except jsonpatch.JsonPatchException as exc:
            raise ApiError(422, str(exc)) from None
        self.log.append(("dry-patch" if kw.get("dry_run") == "All" else "patch", name))
        if kw.get("dry_run") != "All":
            self.pods[(namespace, name)] = new

    def delete_namespaced_pod(self, name, namespace, **kw):
        if (namespace, name) not in self.pods:
            raise ApiError(404)
        self.log.append(("dry-delete" if kw.get("dry_run") == "All" else "delete", name))
        if kw.get("dry_run") != "All":
            del self.pods[(namespace, name)]

    def read_mutating_webhook_configuration(self, name, **_):
        if self.webhook is None or self.webhook["metadata"]["name"] != name:
            raise ApiError(404)
        return self.webhook

    def delete_mutating_webhook_configuration(self, name, **_):
        self.log.append(("delete-webhook", name))
        self.webhook = None

    def read_mutating_admission_policy_binding(self, name, **_):
        if name not in getattr(self, "bindings", set()):
            raise ApiError(404)
        return {}

    def delete_mutating_admission_policy_binding(self, name, **_):
        self.log.append(("delete-binding", name))
        self.bindings.discard(name)

    def gated(self):
        return sorted(f"{ns}/{n}" for (ns, n), p in self.pods.items()
                      if GATE in [g["name"] for g in p["spec"].get("schedulingGates") or ()])


def _pods():
    return [pod("a", "ns1").group("g").gated().raw(), pod("b", "ns1").group("g").gated(OTHER, GATE).raw(),
            pod("c", "ns2").group("h").gated().raw(), pod("free", "ns1").raw(),
            pod("theirs", "ns1").gated(OTHER).raw()]


def _run(fake, *argv, sleep=None):
    return ungate.main(list(argv), apis=(fake, fake), sleep=sleep or (lambda s: None))


def test_all_removes_only_cogates_gate_everywhere(capsys):
    fake = Fake(_pods())
    assert _run(fake, "--all") == 0
    assert fake.gated() == []
    assert [g["name"] for g in fake.pods[("ns1", "b")]["spec"]["schedulingGates"]] == [OTHER], "others' gates stay"
    assert fake.pods[("ns1", "theirs")]["spec"]["schedulingGates"] == [{"name": OTHER}]
    out = capsys.readouterr().out
    assert "ungated ns1/a" in out and "ungated ns2/c" in out
    assert out.splitlines()[-1] == "cogate ungate: ungated 3 pods; 0 already ungated or gone; 0 failed"


def test_one_namespace_and_one_group():
    fake = Fake(_pods())
    assert _run(fake, "--all", "-n", "ns2") == 0
    assert fake.gated() == ["ns1/a", "ns1/b"]
    fake = Fake(_pods() + [pod("x", "ns1").group("other").gated().raw()])
    assert _run(fake, "--group", "g", "-n", "ns1") == 0
    assert fake.gated() == ["ns1/x", "ns2/c"]


def test_dry_run_changes_nothing_and_says_what_it_would_do(capsys):
    fake = Fake(_pods(), webhook={"metadata": {"name": "cogate"}, "webhooks": [{"timeoutSeconds": 5}]})
    assert _run(fake, "--all", "--dry-run", "--webhook-configuration", "cogate") == 0
    assert fake.gated() == ["ns1/a", "ns1/b", "ns2/c"] and fake.webhook is not None
    assert {e[0] for e in fake.log} == {"list", "dry-patch"}
    out = capsys.readouterr().out
    assert "would be deleted" in out and "would ungate 3 pods" in out


def test_delete_deletes_the_gated_pods_only():
    fake = Fake(_pods())
    assert _run(fake, "--all", "--delete") == 0
    assert sorted(n for _, n in fake.pods) == ["free", "theirs"]


def test_the_webhook_goes_first_then_a_sweep_after_its_timeout_catches_admissions_in_flight():
    fake = Fake(_pods(), webhook={"metadata": {"name": "cogate"}, "webhooks": [{"timeoutSeconds": 5}, {}]})
    slept = []
    lists = []

    def in_flight(f):  # a pod admitted before the deletion is stored after the first sweep
        lists.append(1)
        if len(lists) == 2:
            f.pods[("ns1", "late")] = pod("late", "ns1").group("g").gated().raw()

    fake.on_list = in_flight
    assert _run(fake, "--all", "--webhook-configuration", "cogate", sleep=slept.append) == 0
    assert fake.log[0] == ("delete-webhook", "cogate")
    assert slept == [10.0], "the largest timeoutSeconds (unset: the API default 10)"
    assert fake.gated() == []


def test_an_absent_webhook_configuration_is_fine_and_no_wait(capsys):
    fake = Fake(_pods())
    slept = []
    assert _run(fake, "--all", "--webhook-configuration", "gone", sleep=slept.append) == 0
    assert slept == [] and "gone: absent" in capsys.readouterr().out


def test_a_pod_changed_meanwhile_is_read_again_and_a_refusal_is_reported(capsys):
    fake = Fake(_pods())
    fake.errors["a"] = [ApiError(422, "test failed")]
    fake.errors["c"] = [ApiError(403, "forbidden")]
    assert _run(fake, "--all") == 1
    assert fake.gated() == ["ns2/c"]
    out = capsys.readouterr().out
    assert "failed ns2/c: HTTP 403" in out and out.splitlines()[-1].endswith("1 failed")


def test_a_pod_gone_meanwhile_is_counted_as_gone():
    fake = Fake(_pods())
    fake.errors["a"] = [ApiError(404)]
    assert _run(fake, "--all") == 0


def test_no_api_server_is_exit_1(capsys):
    class Down(Fake):
        def list_pod_for_all_namespaces(self, **_):
            raise ApiError(503, "unavailable")

    assert _run(Down([]), "--all") == 1
    assert "HTTP 503" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["--group", "g"], ["--all", "--group", "g", "-n", "x"], ["--all", "--settle", "x"]])
def test_usage_errors(argv):
    with pytest.raises(SystemExit) as exc:
        ungate.parse_args(argv)
    assert exc.value.code == 2


def test_policy_bindings_go_first_then_a_sweep_after_the_policy_settle(capsys):
    """Chart admission.mode policy: the gate policy's binding is deleted before the sweep; pods admitted
    while kube-apiserver had not yet seen the deletion are caught by a second sweep."""
    fake = Fake(_pods())
    fake.bindings = {"cogate-gate"}
    slept = []
    lists = []

    def in_flight(f):
        lists.append(1)
        if len(lists) == 2:
            f.pods[("ns1", "late")] = pod("late", "ns1").group("g").gated().raw()

    fake.on_list = in_flight
    assert _run(fake, "--all", "--admission-policy-binding", "cogate-gate", "--admission-policy-binding",
                "cogate-late-labels", sleep=slept.append) == 0
    assert fake.log[0] == ("delete-binding", "cogate-gate") and fake.bindings == set()
    assert slept == [ungate.POLICY_SETTLE] and fake.gated() == []
    out = capsys.readouterr().out
    assert "cogate-gate: deleted" in out and "cogate-late-labels: absent" in out
