"""localcluster.versions: the Kubernetes releases the local control plane runs (issue 18 item 1), how
one is selected (argument, ``$COGATE_KUBERNETES_VERSION``, default) and the feature-gate flags."""

from __future__ import annotations

import json

import pytest

from cogate.localcluster import build, cluster, versions


@pytest.fixture(autouse=True)
def _no_selection(monkeypatch):
    monkeypatch.delenv(versions.KUBERNETES_VERSION_ENV, raising=False)
    monkeypatch.delenv(versions.FEATURE_GATES_ENV, raising=False)


def test_the_table():
    assert versions.DEFAULT_RELEASE == versions.KUBERNETES == "v1.36.3"
    assert {"v1.30.14", "v1.36.3", "v1.37.2"} <= set(versions.RELEASES)
    for tag, r in versions.RELEASES.items():
        assert r.kubernetes == tag
        minor = int(tag.split(".")[1])
        # the etcd line kube-apiserver's go.mod requires: 3.5 up to 1.33, 3.6 up to 1.36, 3.7 from 1.37
        assert r.etcd.startswith("v3.7." if minor >= 37 else "v3.6." if minor >= 34 else "v3.5.")
        # GenericWorkload (native gang scheduling) exists from 1.35 on
        # CompositePodGroup (KEP-6012, sets of gangs) is alpha from 1.37 on
        assert set(r.runtime_config) == ({"GenericWorkload"} if minor >= 35 else set()) | \
            ({"CompositePodGroup"} if minor >= 37 else set())
    default = versions.RELEASES[versions.DEFAULT_RELEASE]
    assert (default.etcd, default.kwok) == (versions.ETCD, versions.KWOK)
    assert versions.RELEASES["v1.37.2"].runtime_config["GenericWorkload"] == ("scheduling.k8s.io/v1beta1=true",)
    assert versions.RELEASES["v1.37.2"].runtime_config["CompositePodGroup"] == ("scheduling.k8s.io/v1alpha3=true",)
    assert versions.RELEASES["v1.36.3"].runtime_config["GenericWorkload"] == ("scheduling.k8s.io/v1alpha2=true",)
    assert set(versions.RELEASE_TOOLS) <= set(versions.TOOLS)


@pytest.mark.parametrize("version, environ, tag", [
    (None, {}, "v1.36.3"),
    ("", {}, "v1.36.3"),
    ("1.37.2", {}, "v1.37.2"),
    ("v1.37.2", {}, "v1.37.2"),
    (None, {versions.KUBERNETES_VERSION_ENV: "1.37.2"}, "v1.37.2"),
    (None, {versions.KUBERNETES_VERSION_ENV: ""}, "v1.36.3"),
    ("1.36.3", {versions.KUBERNETES_VERSION_ENV: "1.37.2"}, "v1.36.3"),  # an argument wins
    ("1.30.14", {}, "v1.30.14"),
    (None, {versions.KUBERNETES_VERSION_ENV: "v1.30.14"}, "v1.30.14"),
])
def test_release_selection(version, environ, tag):
    assert versions.release(version, environ).kubernetes == tag


@pytest.mark.parametrize("version, environ, source", [
    ("1.29.0", {}, "kubernetes version '1.29.0'"),
    ("1.37", {}, "kubernetes version '1.37'"),
    (None, {versions.KUBERNETES_VERSION_ENV: "latest"}, "$COGATE_KUBERNETES_VERSION 'latest'"),
])
def test_unknown_release_lists_the_supported_ones(version, environ, source):
    with pytest.raises(versions.UnknownRelease) as exc:
        versions.release(version, environ)
    msg = str(exc.value)
    assert msg.startswith(f"{source} is not supported; choose one of ")
    assert all(t.lstrip("v") in msg for t in versions.RELEASES)
    assert isinstance(exc.value, ValueError)


def test_tools_follow_the_release():
    for name in versions.TOOLS:
        module, version, packages = versions.tool(name, "1.37.2")
        assert (module, packages) == (versions.TOOLS[name][0], versions.TOOLS[name][2])
        expected = {"kubernetes": "v1.37.2", "kubernetes-node": "v1.37.2", "etcd": "v3.7.3",
                    "kwok": versions.KWOK}.get(name, versions.TOOLS[name][1])
        assert version == expected
        assert versions.tool(name) == versions.TOOLS[name]  # the default release is the pins


def test_the_oldest_release_runs_etcd_3_5():
    """v1.30.14 (the oldest release the README claims): its go.mod requires the etcd 3.5 client."""
    assert versions.tool("etcd", "1.30.14")[1] == "v3.5.35"
    assert versions.tool("kubernetes-node", "1.30.14")[1] == versions.tool("kubernetes", "1.30.14")[1] == "v1.30.14"
    assert versions.tool("kwok", "1.30.14")[1] == versions.KWOK
    assert versions.tool("helm", "1.30.14") == versions.TOOLS["helm"]


def test_each_release_has_its_own_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    assert build.bin_dir("kubernetes") == tmp_path / "bin" / "kubernetes-v1.36.3"
    assert build.bin_dir("kubernetes", "1.37.2") == tmp_path / "bin" / "kubernetes-v1.37.2"
    assert build.binary("kubelet", "1.37.2") == tmp_path / "bin" / "kubernetes-node-v1.37.2" / "kubelet"
    assert build.binary("etcd", "1.37.2") == tmp_path / "bin" / "etcd-v3.7.3" / "etcd"
    assert build.binary("helm", "1.37.2") == build.binary("helm")  # one pin for every release
    monkeypatch.setenv(versions.KUBERNETES_VERSION_ENV, "1.37.2")
    assert build.binary("kubectl") == tmp_path / "bin" / "kubernetes-v1.37.2" / "kubectl"


def test_build_of_a_release_builds_its_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    built: list[tuple[str, str, str]] = []

    def fake_build(tool, module, version, packages, out, names, log):
        built.append((tool, version, out.name))
        out.mkdir(parents=True)
        for n in names:
            (out / n).write_text("binary")

    monkeypatch.setattr(build, "_build", fake_build)
    spent = build.ensure_binaries(["etcd", "kubernetes"], log=open("/dev/null", "w"), kubernetes_version="1.37.2")
    assert built == [("etcd", "v3.7.3", "etcd-v3.7.3"), ("kubernetes", "v1.37.2", "kubernetes-v1.37.2")]
    assert set(spent) == {"etcd", "kubernetes"}
    # cached now; the default release is another directory, still to build
    assert build.build_tool("kubernetes", kubernetes_version="v1.37.2") == 0.0
    build.build_tool("kubernetes")
    assert built[-1] == ("kubernetes", "v1.36.3", "kubernetes-v1.36.3")


def test_build_command_refuses_an_unknown_release(capsys):
    with pytest.raises(SystemExit) as exc:
        build.main(["--kubernetes-version", "1.20.0", "kwok"])
    assert exc.value.code == 2
    assert "'1.20.0' is not supported" in capsys.readouterr().err


@pytest.mark.parametrize("text, gates", [
    ("", {}),
    ("GenericWorkload=true", {"GenericWorkload": True}),
    (" GenericWorkload=True , Foo=false ,", {"GenericWorkload": True, "Foo": False}),
    ({"GenericWorkload": True}, {"GenericWorkload": True}),
])
def test_feature_gates(text, gates):
    assert versions.feature_gates(text, {}) == gates


def test_feature_gates_from_the_environment():
    assert versions.feature_gates(None, {versions.FEATURE_GATES_ENV: "GenericWorkload=true"}) == {"GenericWorkload": True}
    assert versions.feature_gates(None, {}) == {}
    assert versions.feature_gates("", {versions.FEATURE_GATES_ENV: "GenericWorkload=true"}) == {}  # given: wins


@pytest.mark.parametrize("text, field", [
    ("GenericWorkload", "'GenericWorkload'"),
    ("GenericWorkload=yes", "'GenericWorkload=yes'"),
    ("=true", "''"),
    ("generic-workload=true", "'generic-workload'"),
    ({"GenericWorkload": "true"}, "'GenericWorkload'"),
])
def test_malformed_feature_gates_name_the_entry(text, field):
    with pytest.raises(ValueError, match=f"feature gate {field}"):
        versions.feature_gates(text, {})


def test_feature_gate_flags():
    r137 = versions.RELEASES["v1.37.2"]
    assert versions.feature_gate_flags(r137, {}) == {}
    on = versions.feature_gate_flags(r137, {"GenericWorkload": True})
    assert on == {"kube-apiserver": ["--feature-gates=GenericWorkload=true",
                                     "--runtime-config=scheduling.k8s.io/v1beta1=true"],
                  "kube-scheduler": ["--feature-gates=GenericWorkload=true"],
                  "kube-controller-manager": ["--feature-gates=GenericWorkload=true"]}
    off = versions.feature_gate_flags(r137, {"GenericWorkload": False, "Foo": True})
    assert off["kube-apiserver"] == ["--feature-gates=Foo=true,GenericWorkload=false"]  # no API turned on
    alpha = versions.feature_gate_flags(versions.RELEASES["v1.36.3"], {"GenericWorkload": True})
    assert alpha["kube-apiserver"][1] == "--runtime-config=scheduling.k8s.io/v1alpha2=true"
    # 1.30 has no native API to turn on: the gate alone is passed (its kube-apiserver then refuses it)
    old = versions.feature_gate_flags(versions.RELEASES["v1.30.14"], {"GenericWorkload": True})
    assert old["kube-apiserver"] == ["--feature-gates=GenericWorkload=true"]


def test_local_cluster_runs_the_selected_release(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path / "cache"))
    spawned: dict[str, list[str]] = {}
    monkeypatch.setattr(cluster, "spawn", lambda name, argv, log, cwd=None, env=None: spawned.setdefault(name, argv))
    c = cluster.LocalCluster(tmp_path / "work", kubernetes_version="1.37.2", feature_gates="GenericWorkload=true",
                             extra_args={"kube-apiserver": ["--v=4"]})
    assert c.release.kubernetes == "v1.37.2" and c.feature_gates == {"GenericWorkload": True}
    c._spawn("kube-apiserver", ["--secure-port=1"])
    c._spawn("kwok", [])
    assert spawned["kube-apiserver"] == [str(tmp_path / "cache/bin/kubernetes-v1.37.2/kube-apiserver"), "--secure-port=1",
                                         "--feature-gates=GenericWorkload=true",
                                         "--runtime-config=scheduling.k8s.io/v1beta1=true", "--v=4"]
    assert spawned["kwok"] == [str(tmp_path / "cache/bin" / f"kwok-{versions.KWOK}" / "kwok")]


def test_local_cluster_reads_the_environment_and_refuses_an_unknown_release(monkeypatch):
    monkeypatch.setenv(versions.KUBERNETES_VERSION_ENV, "1.37.2")
    monkeypatch.setenv(versions.FEATURE_GATES_ENV, "GenericWorkload=true")
    c = cluster.LocalCluster()
    assert (c.release.kubernetes, c.feature_gates) == ("v1.37.2", {"GenericWorkload": True})
    assert cluster.LocalCluster(kubernetes_version="1.36.3", feature_gates={}).release.kubernetes == "v1.36.3"
    with pytest.raises(versions.UnknownRelease, match="'9.9.9' is not supported"):
        cluster.LocalCluster(kubernetes_version="9.9.9")


def test_a_detached_clusters_state_keeps_its_release(tmp_path):
    c = cluster.LocalCluster(tmp_path, kubernetes_version="1.37.2", feature_gates={"GenericWorkload": True})
    c.ports = {"kube-apiserver": 6443}
    c._write_state()
    again = cluster.LocalCluster.attach(c.state_file)
    assert (again.release.kubernetes, again.feature_gates) == ("v1.37.2", {"GenericWorkload": True})
    state = cluster.LocalCluster.read_state(c.state_file)
    del state["kubernetes_version"], state["feature_gates"]  # a state file written before issue 18
    c.state_file.write_text(json.dumps(state))
    old = cluster.LocalCluster.attach(c.state_file)
    assert (old.release.kubernetes, old.feature_gates) == (versions.DEFAULT_RELEASE, {})


@pytest.mark.parametrize("version, controllers, loopback", [
    ("1.36.3", "--controllers=*,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller", False),
    # 1.37: no cloud controllers left to turn off; no endpoint reconciler on 127.0.0.1
    ("1.37.2", "--controllers=*", True),
    # 1.30 has the same cloud controllers as 1.36 (k8s.io/cloud-provider names) and only warns on 127.0.0.1
    ("1.30.14", "--controllers=*,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller", False),
])
def test_per_release_flags_of_the_control_plane(tmp_path, monkeypatch, version, controllers, loopback):
    spawned: dict[str, list[str]] = {}
    monkeypatch.setattr(cluster, "spawn", lambda name, argv, log, cwd=None, env=None: spawned.setdefault(name, argv))
    c = cluster.LocalCluster(tmp_path, kubernetes_version=version)
    c.ports = {"etcd": 1, "kube-apiserver": 2, "kube-controller-manager": 3}
    c._start_apiserver()
    c._start_controller_manager()
    assert controllers in spawned["kube-controller-manager"]
    assert ("--endpoint-reconciler-type=none" in spawned["kube-apiserver"]) is loopback
    assert not any(a.startswith("--feature-gates") for a in spawned["kube-apiserver"])  # none asked for
