"""Which admission webhooks and policies could refuse a release patch (controller/release/refusers.py),
and the reconciler's ``--validate-releases auto`` built on it."""

from __future__ import annotations

import itertools
import logging

import pytest

from cogate.controller.release import refusers
from cogate.controller.kube.informer import Informer

from tests.builders import Harness, raw_pg, raw_pod, verdict

POD_UPDATE = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def rule(**changes):
    return {**POD_UPDATE, **changes}


# Each field's values that keep a rule intercepting pod UPDATEs, and values that do not.
FIELD_VALUES = {
    "operations": ([["UPDATE"], ["*"], ["CREATE", "UPDATE"]], [["CREATE"], ["DELETE", "CONNECT"], []]),
    "apiGroups": ([[""], ["*"], ["apps", ""]], [["apps"], ["batch", "policy"], []]),
    "apiVersions": ([["v1"], ["*"], ["v1beta1", "v1"]], [["v1beta1"], []]),
    "resources": ([["pods"], ["*"], ["*/*"], ["deployments", "pods"]],
                  [["pods/status"], ["pods/*"], ["pods/binding"], ["deployments"], []]),
    "scope": ([None, "*", "Namespaced"], ["Cluster"]),
}


def _cases():
    for field, (yes, no) in FIELD_VALUES.items():
        for v in yes:
            yield field, v, True
        for v in no:
            yield field, v, False


@pytest.mark.parametrize("field,value,expected", list(_cases()))
def test_rule_matching_field_by_field(field, value, expected):
    r = rule(**{field: value})
    if value is None:
        r.pop(field)
    assert refusers.rule_intercepts_pod_update(r) is expected


def test_rule_matching_every_combination():
    """All fields at once: the rule intercepts exactly when every field does."""
    fields = list(FIELD_VALUES)
    for combo in itertools.product(*[[(v, True) for v in FIELD_VALUES[f][0][:2]] + [(v, False) for v in
                                                                                    FIELD_VALUES[f][1][:1]]
                                     for f in fields]):
        r = {f: v for f, (v, _) in zip(fields, combo) if v is not None}
        assert refusers.rule_intercepts_pod_update(r) is all(ok for _, ok in combo), r


@pytest.mark.parametrize("odd", ["x", None, 3, {"operations": "UPDATE", "apiGroups": [""], "apiVersions": ["v1"],
                                                "resources": ["pods"]},
                                 {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"]},
                                 {"operations": ["UPDATE"], "apiGroups": [1], "apiVersions": ["v1"],
                                  "resources": ["pods"]}])
def test_a_rule_of_unexpected_shape_counts_as_intercepting(odd):
    assert refusers.rule_intercepts_pod_update(odd) is True


def webhook_config(name, *hooks):
    return {"metadata": {"name": name}, "webhooks": [{"name": h, "rules": rules} for h, rules in hooks]}


@pytest.mark.parametrize("kind", refusers.WEBHOOK_KINDS)
def test_webhooks_named_by_configuration_and_webhook(kind):
    raw = webhook_config("policy", ("a.example.com", [rule(operations=["CREATE"])]),
                         ("b.example.com", [rule(operations=["CREATE"]), rule()]),
                         ("c.example.com", [rule(resources=["pods/status"])]))
    assert refusers.webhook_interceptors(raw, kind) == (f"{kind} policy/b.example.com",)
    assert refusers.interceptors_of(kind)(raw) == (f"{kind} policy/b.example.com",)


def test_cogates_own_webhook_does_not_count():
    """The webhook cogate registers (pods CREATE only, cogate.webhook.config) intercepts no update."""
    from cogate.webhook.config import webhook_configuration

    raw = webhook_configuration({"service": {"namespace": "cogate", "name": "cogate-webhook"}, "caBundle": "eA=="})
    assert refusers.webhook_interceptors(raw, "MutatingWebhookConfiguration") == ()


@pytest.mark.parametrize("raw,expected", [
    ({"metadata": {"name": "w"}}, ()),
    ({"metadata": {"name": "w"}, "webhooks": []}, ()),
    ({"metadata": {"name": "w"}, "webhooks": [{"name": "h"}]}, ()),
    ({"metadata": {"name": "w"}, "webhooks": "x"}, ("K w (webhooks: not a list)",)),
    ({"metadata": {"name": "w"}, "webhooks": ["x"]}, ("K w/webhooks[0] (not an object)",)),
    ({"metadata": {"name": "w"}, "webhooks": [{"name": "h", "rules": "x"}]}, ("K w/h",)),
    ({"webhooks": [{"rules": [POD_UPDATE]}]}, ("K ?/webhooks[0]",)),
])
def test_webhook_configurations_of_every_shape(raw, expected):
    assert refusers.webhook_interceptors(raw, "K") == expected


@pytest.mark.parametrize("kind", refusers.POLICY_KINDS)
@pytest.mark.parametrize("spec,intercepts", [
    ({"matchConstraints": {"resourceRules": [rule()]}}, True),
    ({"matchConstraints": {"resourceRules": [rule(operations=["CREATE"]), rule(operations=["*"])]}}, True),
    ({"matchConstraints": {"resourceRules": [rule(operations=["CREATE"])]}}, False),
    ({"matchConstraints": {"resourceRules": [rule(apiGroups=["apps"], resources=["deployments"])]}}, False),
    ({"matchConstraints": {}}, False),
    ({"matchConstraints": {"resourceRules": "x"}}, True),
    ({}, True),                 # no readable constraints: counted
    ("x", True),
])
def test_policies(kind, spec, intercepts):
    raw = {"metadata": {"name": "deny-affinity"}, "spec": spec}
    assert refusers.policy_interceptors(raw, kind) == ((f"{kind} deny-affinity",) if intercepts else ())


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        refusers.interceptors_of("PodSecurityPolicy")


@pytest.mark.parametrize("served,watched,unwatched", [
    ({"v1": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
             "validatingadmissionpolicies/status", "validatingadmissionpolicybindings", "mutatingadmissionpolicies"]},
     ["mutatingadmissionpolicies", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
      "validatingwebhookconfigurations"], []),
    ({"v1": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies"],
      "v1beta1": ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"]},
     ["mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingwebhookconfigurations"],
     ["mutatingadmissionpolicies"]),
    ({"v1": ["validatingwebhookconfigurations", "mutatingadmissionpolicies"],
      "v1alpha1": ["mutatingadmissionpolicies"]},
     ["mutatingadmissionpolicies", "validatingwebhookconfigurations"], []),
    ({}, [], []),
])
def test_which_kinds_are_watched(served, watched, unwatched):
    assert refusers.watched_and_unwatched(served) == (watched, unwatched)


@pytest.mark.parametrize("mode,known,names,expected", [
    ("always", True, [], True), ("always", False, [], True),
    ("never", True, ["x"], False), ("never", False, [], False),
    ("auto", True, [], False), ("auto", True, ["x"], True), ("auto", False, [], True),
])
def test_dry_run_needed(mode, known, names, expected):
    assert refusers.dry_run_needed(mode, known, names) is expected


def test_dry_run_needed_refuses_unknown_modes():
    with pytest.raises(ValueError, match="validate releases"):
        refusers.dry_run_needed("sometimes", True, [])


# -- the reconciler ------------------------------------------------------------------------

def admission_informer(kind, objects, *, synced=True):
    inf = Informer(kind, lambda: (objects, "1"), lambda rv: iter(()), lambda raw: raw["metadata"]["name"],
                   refusers.interceptors_of(kind))
    if synced:
        inf._relist()
    return inf


def released(h):
    return [verdict("Released", {"uid-a": "n1", "uid-b": "n2"}, 2, "fits 2 of 2")]


@pytest.mark.parametrize("situation,dry_runs", [
    ("no interceptor", False),
    ("a policy on pod updates", True),
    ("a webhook on pod updates", True),
    ("informer not synced yet", True),
    ("a kind not watched", True),
])
def test_auto_dry_runs_only_while_something_could_refuse(situation, dry_runs, caplog):
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], released(None))
    benign = webhook_config("other", ("create.example.com", [rule(operations=["CREATE"])]))
    vap = {"metadata": {"name": "deny"}, "spec": {"matchConstraints": {"resourceRules": [rule()]}}}
    informers = {
        "no interceptor": [admission_informer("MutatingWebhookConfiguration", [benign]),
                           admission_informer("ValidatingAdmissionPolicy", [])],
        "a policy on pod updates": [admission_informer("MutatingWebhookConfiguration", [benign]),
                                    admission_informer("ValidatingAdmissionPolicy", [vap])],
        "a webhook on pod updates": [admission_informer("ValidatingWebhookConfiguration",
                                                        [webhook_config("v", ("u.example.com", [rule()]))])],
        "informer not synced yet": [admission_informer("ValidatingAdmissionPolicy", [], synced=False)],
        "a kind not watched": [admission_informer("ValidatingAdmissionPolicy", [])],
    }[situation]
    h.caches.admission = tuple(informers)
    h.caches.admission_known = situation != "a kind not watched"
    with caplog.at_level(logging.INFO, logger="cogate.controller.release.guard"):
        res = h.run()
    assert res.ungated == 2
    assert (("dry-run", "a") in h.cluster.log) is dry_runs
    assert (("dry-run", "b") in h.cluster.log) is dry_runs
    said = [r.getMessage() for r in caplog.records if "dry-run" in r.getMessage()]
    assert len(said) == 1, said
    if situation == "a policy on pod updates":
        assert "ValidatingAdmissionPolicy deny" in said[0]
    # the same answer again is not logged again
    caplog.clear()
    assert h.rec.guard.dry_run_needed() is dry_runs
    assert not [r for r in caplog.records if "dry-run" in r.getMessage()]


@pytest.mark.parametrize("mode,dry_runs", [("always", True), ("never", False)])
def test_always_and_never_ignore_the_informers(mode, dry_runs):
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], released(None))
    h.rec.config.validate_releases = mode
    h.caches.admission = (admission_informer("ValidatingAdmissionPolicy", []),)
    h.caches.admission_known = True
    h.run()
    assert (("dry-run", "a") in h.cluster.log) is dry_runs


def test_unknown_mode_is_refused_at_start():
    from cogate.controller.model.config import ReconcilerConfig
    from cogate.controller.reconciler import Reconciler

    h = Harness([raw_pod("a")], [raw_pg()], [])
    with pytest.raises(ValueError, match="validate_releases"):
        Reconciler(h.cluster, h.cluster, h.caches, ReconcilerConfig(validate_releases="sometimes"), decide=h.decide)


def test_failed_discovery_leaves_auto_dry_running(caplog):
    """The controller cannot tell what the API server serves (here: a client whose every call
    fails): no admission informers, not known, so every release is dry-run."""
    from cogate.controller.release import feature

    class Broken:
        def __getattr__(self, name):
            raise ConnectionError("API server unreachable")

    with caplog.at_level(logging.WARNING):
        informers, known = feature.admission_informers(Broken(), lambda *a: pytest.fail("no informer"))
    assert (informers, known) == ((), False)
    assert "every release patch is dry-run first" in caplog.text
    assert refusers.dry_run_needed("auto", known, ()) is True


ALL_V1 = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
          "validatingadmissionpolicies/status", "validatingadmissionpolicybindings", "mutatingadmissionpolicies",
          "mutatingadmissionpolicybindings"]
LISTERS = ["list_validating_webhook_configuration", "list_mutating_webhook_configuration",
           "list_validating_admission_policy", "list_mutating_admission_policy"]


def _fake_client(monkeypatch, served, listers=LISTERS):
    """kubernetes.client's admissionregistration classes replaced by fakes answering discovery
    with ``served`` (version -> resource names); the v1 API has the methods ``listers``."""
    from types import SimpleNamespace as Obj

    from kubernetes import client

    class Group:
        def __init__(self, api):
            pass

        def get_api_group(self):
            return Obj(versions=[Obj(version=v) for v in served])

    def version_api(version):
        methods = {"__init__": lambda self, api: None,
                   "get_api_resources": lambda self: Obj(resources=[Obj(name=n) for n in served[version]])}
        if version == "v1":
            methods |= {m: (lambda self, **kw: None) for m in listers}
        return type(f"Fake{version}", (), methods)

    monkeypatch.setattr(client, "AdmissionregistrationApi", Group)
    for version, name in (("v1", "AdmissionregistrationV1Api"), ("v1beta1", "AdmissionregistrationV1beta1Api"),
                          ("v1alpha1", "AdmissionregistrationV1alpha1Api")):
        monkeypatch.setattr(client, name, version_api(version))


@pytest.mark.parametrize("served,listers,names,known", [
    ({"v1": ALL_V1}, LISTERS,
     ["mutatingadmissionpolicies", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
      "validatingwebhookconfigurations"], True),
    ({"v1": ALL_V1[:5], "v1beta1": ["mutatingadmissionpolicies"]}, LISTERS,
     ["mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingwebhookconfigurations"], False),
    ({"v1": ALL_V1, "v1beta1": ["mutatingadmissionpolicies"]}, LISTERS,
     ["mutatingadmissionpolicies", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
      "validatingwebhookconfigurations"], True),
    ({"v1": ALL_V1}, LISTERS[:3],  # a client without the MutatingAdmissionPolicy lister
     ["mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingwebhookconfigurations"], False),
])
def test_discovery_watches_each_kind_served_in_v1(monkeypatch, served, listers, names, known):
    from cogate.controller.release import feature

    _fake_client(monkeypatch, served, listers)
    made = {}

    def make(name, source, key, convert):
        made[name] = convert
        return name

    informers, got_known = feature.admission_informers(object(), make)
    assert sorted(informers) == names and got_known is known
    kinds = {"validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
             "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
             "validatingadmissionpolicies": "ValidatingAdmissionPolicy",
             "mutatingadmissionpolicies": "MutatingAdmissionPolicy"}
    for name, convert in made.items():  # each informer converts with its own kind's rule
        if kinds[name].endswith("Configuration"):
            raw = webhook_config("x", ("h", [POD_UPDATE]))
            assert convert(raw) == (f"{kinds[name]} x/h",)
        else:
            assert convert({"metadata": {"name": "x"}, "spec": {"matchConstraints": {"resourceRules": [POD_UPDATE]}}}) \
                == (f"{kinds[name]} x",)


def test_an_admission_watch_that_fails_makes_auto_dry_run_again():
    """A watch that fails after its first list (rights removed, API server gone) may miss a new
    policy: until it lists again, releases are dry-run."""
    h = Harness([raw_pod("a"), raw_pod("b")], [raw_pg()], released(None))
    inf = admission_informer("ValidatingAdmissionPolicy", [])
    h.caches.admission, h.caches.admission_known = (inf,), True
    assert h.rec.guard.dry_run_needed() is False
    calls = []

    def failing_watch(rv):
        calls.append(rv)
        raise ConnectionError("watch failed")

    import threading

    stop = threading.Event()
    inf._watch = failing_watch
    inf._sleep = lambda seconds, s: stop.set()  # one failure, then stop
    inf.run(stop)
    assert calls and not inf.healthy
    assert h.rec.guard.dry_run_needed() is True
    inf._relist()
    assert inf.healthy and h.rec.guard.dry_run_needed() is False
