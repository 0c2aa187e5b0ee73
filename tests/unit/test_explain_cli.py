"""``cogate explain``'s shell without a cluster: a manifest as the objects it would make
(:mod:`cogate.explain_manifests`), usage errors (exit 2) and an unreachable cluster (exit 3),
each one line on stderr, never a traceback; the kubectl plugin's console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cogate import api, cli
from cogate import explain as explain_cli
from cogate.controller.model.records import pod_info
from cogate.explain_manifests import ManifestError, expand
from cogate.localcluster import example

NOW = 1.7e9


def _template(group: str = "g", cpu: str = "3") -> dict:
    return {"metadata": {"labels": {"app": "x", api.POD_GROUP_LABEL: group}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


def test_readme_example_expands_to_six_gated_members():
    docs = [example.pod_group("nginx", 4, namespace="demo"), example.replica_set("nginx", 6, namespace="demo",
                                                                                  group="nginx")]
    got = expand(docs, "default", NOW)
    assert [pg["metadata"]["name"] for pg in got.podgroups] == ["nginx"]
    assert got.podgroups[0]["metadata"]["namespace"] == "demo"
    assert [p["metadata"]["name"] for p in got.pods] == [f"nginx-{i}" for i in range(6)]
    infos = [pod_info(p) for p in got.pods]
    assert all(i.gates == (api.DEFAULT_GATE_NAME,) and i.namespace == "demo" and i.group == "nginx" for i in infos)
    assert infos[0].requests["cpu"] == 3000 and len({i.uid for i in infos}) == 6


@pytest.mark.parametrize("kind, spec, names", [
    ("StatefulSet", {"replicas": 3}, ["s-0", "s-1", "s-2"]),
    ("Deployment", {}, ["s-0"]),
    ("Job", {"parallelism": 4, "completions": 2}, ["s-0", "s-1"]),
    ("Job", {}, ["s-0"]),
])
def test_workload_kinds_count_pods_as_their_controllers(kind, spec, names):
    doc = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "s"}, "spec": {**spec, "template": _template()}}
    got = expand([doc, None], "ns1", NOW)
    assert [p["metadata"]["name"] for p in got.pods] == names
    assert all(p["metadata"]["namespace"] == "ns1" for p in got.pods)


def test_other_kinds_are_skipped_and_unlabelled_pods_stay_ungated():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"}, "spec": {"containers": []}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    got = expand([{"kind": "List", "items": [pod, svc]}], "ns1", NOW)
    assert got.skipped == ("Service/svc",)
    assert "schedulingGates" not in got.pods[0]["spec"]


@pytest.mark.parametrize("doc, match", [
    ({"kind": "Pod", "metadata": {"name": "p", "labels": {api.POD_GROUP_LABEL: "Bad_Name"}}, "spec": {}},
     "webhook refuses it"),
    ({"kind": "Pod"}, "not a Kubernetes object"),
    ({"kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"replicas": -1, "template": _template()}},
     "non-negative integer"),
    ({"kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {}}, "spec.template"),
])
def test_bad_manifests_are_named(doc, match):
    with pytest.raises(ManifestError, match=match):
        expand([doc], "ns1", NOW)


def _process(*argv: str) -> subprocess.CompletedProcess:
    """``cogate explain ARGV`` as a process: stderr as a user sees it (no test's logging handlers)."""
    return subprocess.run([sys.executable, "-m", "cogate.cli", "explain", *argv], capture_output=True, text=True,
                          timeout=120)


def _run(*argv: str, capsys) -> tuple[int, str, str]:
    code = explain_cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv", [[], ["a", "b", "c"], ["x", "--add-nodes", "2"]])
def test_usage_errors_exit_2_in_one_line(argv, capsys):
    code, _, err = _run(*argv, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("cogate explain: ")


def test_unreadable_manifest_is_a_usage_error(tmp_path):
    kc = _kubeconfig(tmp_path)
    bad = tmp_path / "m.yaml"
    bad.write_text("kind: [unclosed")
    out = _process("-f", str(bad), "--kubeconfig", str(kc))
    assert out.returncode == 2 and out.stderr.startswith(f"cogate explain: -f {bad}: ") and out.stderr.count("\n") == 1
    empty = tmp_path / "e.yaml"
    empty.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    out = _process("-f", str(empty), "--kubeconfig", str(kc))
    assert out.returncode == 2 and "no PodGroup" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def _kubeconfig(tmp_path: Path) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ns1"}}]}))
    return kc


def test_unreachable_cluster_exits_3_in_one_line(tmp_path):
    out = _process("nginx", "--kubeconfig", str(_kubeconfig(tmp_path)))
    assert out.returncode == 3 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("cogate explain: cannot list podgroups: ")
    out = _process("nginx", "--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 3 and out.stderr == (f"cogate explain: no usable Kubernetes configuration: kubeconfig "
                                                  f"{tmp_path / 'missing'} (--kubeconfig) does not exist\n"), out.stderr
    out = _process("nginx", "--kubeconfig", str(_kubeconfig(tmp_path)), "--context", "nope")
    assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize("kubeconfig,source", [("missing", "$KUBECONFIG"), ("", "the default")])
def test_a_missing_kubeconfig_is_named_before_the_in_cluster_fallback(tmp_path, monkeypatch, capsys, kubeconfig,
                                                                     source):
    """KUBECONFIG=/nonexistent (or no ~/.kube/config): the answer names that file, not only the
    in-cluster fallback's "Service host/port is not set"; exit 3 (issue 29)."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / kubeconfig) if kubeconfig else "")
    monkeypatch.setattr(explain_cli, "KUBECONFIG_DEFAULT", str(tmp_path / "home-kube-config"))
    for var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    code, out, err = _run("nginx", capsys=capsys)
    path = tmp_path / (kubeconfig or "home-kube-config")
    assert code == 3 and out == "", err
    assert err.startswith(f"cogate explain: no usable Kubernetes configuration: kubeconfig {path} ({source}) "
                          "does not exist; not in a cluster either ("), err


def test_dispatcher_and_kubectl_plugin_name_the_command():
    assert cli.COMMANDS["explain"][0] == "cogate.explain"
    scripts = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'kubectl-cogate = "cogate.cli:main"' in scripts
    out = subprocess.run([sys.executable, "-m", "cogate.cli", "explain", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--add-nodes" in out.stdout and "--node-template" in out.stdout


def test_priority_comes_from_the_class_as_the_admission_plugin_sets_it():
    from cogate.explain_manifests import PriorityClass
    classes = {"high": PriorityClass("high", 1000, "Never"), "base": PriorityClass("base", 7, global_default=True)}
    named = {"kind": "Pod", "metadata": {"name": "a"}, "spec": {"priorityClassName": "high", "containers": []}}
    plain = {"kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": []}}
    a, b = expand([named, plain], "ns1", NOW, classes=classes).pods
    assert (a["spec"]["priority"], a["spec"]["preemptionPolicy"]) == (1000, "Never")
    assert (b["spec"]["priority"], b["spec"]["preemptionPolicy"]) == (7, "PreemptLowerPriority")
    missing = {"kind": "Pod", "metadata": {"name": "c"}, "spec": {"priorityClassName": "nope"}}
    with pytest.raises(ManifestError, match="no PriorityClass with name nope"):
        expand([missing], "ns1", NOW, classes=classes)
    assert "priority" not in expand([plain], "ns1", NOW).pods[0]["spec"]  # classes unknown: left as stated


def test_warnings_of_cogate_modules_become_notes():
    import logging
    notes: list[str] = []
    with explain_cli.warnings_as_notes(notes):
        logging.getLogger("cogate.controller.devices.feature").warning("DRA devices are not modelled (%s)", "why")
        logging.getLogger("cogate.controller.devices.feature").info("not a note")
    assert notes == ["DRA devices are not modelled (why)"]
