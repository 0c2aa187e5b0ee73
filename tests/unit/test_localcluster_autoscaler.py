"""localcluster.autoscaler, the pure part: node groups, the kwok provider's ConfigMaps and template
Nodes, the autoscaler's command line and environment, its status ConfigMap; and where the build
finds the cluster-autoscaler source snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cogate.localcluster import autoscaler, build, versions
from cogate.localcluster.autoscaler import AUTOSCALED, AutoscalerSpec, NodeGroup

GiB = 2**30


def test_the_dev_group_is_the_issues():
    assert AUTOSCALED == NodeGroup("autoscaled", cpu=16_000, memory=64 * GiB, pods=110,
                                   labels={"cogate.dev/node-group": "autoscaled"}, min=0, max=4)


@pytest.mark.parametrize("kwargs, field", [
    (dict(name="Upper"), "name"),
    (dict(name="a" * 58), "name"),
    (dict(name="-x"), "name"),
    (dict(name=""), "name"),
    (dict(cpu=0), "cpu"),
    (dict(cpu=1.5), "cpu"),
    (dict(cpu=True), "cpu"),
    (dict(memory=-1), "memory"),
    (dict(memory="1Gi"), "memory"),
    (dict(pods=0), "pods"),
    (dict(min=-1), "min"),
    (dict(max=None), "max"),
    (dict(min=3, max=2), "min (3) is greater than max (2)"),
    (dict(labels={"a": 1}), "labels"),
    (dict(labels=[("a", "b")]), "labels"),
    (dict(labels={"kwok-nodegroup": "other"}), "labels: kwok-nodegroup"),
    (dict(taints=({"key": "k", "effect": "Never"},)), "taints[0].effect"),
    (dict(taints=({"effect": "NoSchedule"},)), "taints[0]"),
])
def test_bad_node_groups_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(ValueError) as err:
        NodeGroup(**{"name": "g", "cpu": 1000, "memory": GiB, **kwargs})
    assert str(err.value).startswith(field)


def test_the_template_node_carries_what_the_provider_reads():
    group = NodeGroup("gpu-a", cpu=1500, memory=3 * GiB, pods=7, labels={"team": "x"},
                      taints=({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                              {"key": "spot", "effect": "PreferNoSchedule", "value": ""}), min=1, max=3)
    node = autoscaler.template_node(group)
    assert node["kind"] == "Node" and node["metadata"]["name"] == "gpu-a"
    assert node["metadata"]["labels"] == {"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                          "kwok-nodegroup": "gpu-a", "team": "x"}
    assert node["metadata"]["annotations"] == {
        "kwok.x-k8s.io/node": "fake",
        "cluster-autoscaler.kwok.nodegroup/name": "gpu-a",
        "cluster-autoscaler.kwok.nodegroup/min-count": "1",
        "cluster-autoscaler.kwok.nodegroup/max-count": "3",
        "cluster-autoscaler.kwok.nodegroup/desired-count": "1",
    }
    assert node["spec"] == {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                       {"key": "spot", "effect": "PreferNoSchedule"}]}
    resources = {"cpu": "1500m", "memory": str(3 * GiB), "pods": "7"}
    assert node["status"] == {"capacity": resources, "allocatable": resources}


def test_the_dev_template_is_untainted_16_cpu_64gi():
    node = autoscaler.template_node(AUTOSCALED)
    assert node["status"]["allocatable"] == {"cpu": "16", "memory": str(64 * GiB), "pods": "110"}
    assert node["spec"] == {}
    assert "kubernetes.io/hostname" not in node["metadata"]["labels"]  # it would be copied to every node
    assert node["metadata"]["labels"]["cogate.dev/node-group"] == "autoscaled"


def test_the_provider_config_is_the_one_that_worked():
    cm = autoscaler.provider_config_map("ns1")
    assert cm["metadata"] == {"name": "kwok-provider-config", "namespace": "ns1"}
    assert yaml.safe_load(cm["data"]["config"]) == {
        "apiVersion": "v1alpha1", "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": "kwok-nodegroup"}, "nodes": {"skipTaint": True},
        "configmap": {"name": "kwok-provider-templates", "key": "templates"}}


def test_the_templates_config_map_is_a_v1_list_of_every_group_in_order():
    groups = (AUTOSCALED, NodeGroup("small", cpu=2000, memory=4 * GiB))
    cm = autoscaler.templates_config_map(groups, "ns1")
    assert cm["metadata"] == {"name": "kwok-provider-templates", "namespace": "ns1"}
    data = yaml.safe_load(cm["data"]["templates"])
    assert (data["apiVersion"], data["kind"]) == ("v1", "List")
    assert data["items"] == [autoscaler.template_node(g) for g in groups]


def test_the_command_line_has_the_flags_that_worked_and_the_specs():
    spec = AutoscalerSpec(namespace="ns1", scan_interval=0.5, scale_down_unneeded_time=30,
                          scale_down_delay_after_add=45.5, max_node_provision_time=90, extra_args=("--v=4",))
    argv = autoscaler.command_line("/bin/ca", "/k/kc", spec, 4242)
    assert argv[0] == "/bin/ca"
    assert argv[1:] == [
        "--kubeconfig=/k/kc", "--cloud-provider=kwok", "--namespace=ns1", "--address=127.0.0.1:4242",
        "--scan-interval=0.5s", "--leader-elect=false", "--expander=least-waste", "--max-node-provision-time=90s",
        "--enable-provisioning-requests=true", "--scale-down-unneeded-time=30s",
        "--scale-down-delay-after-add=45.5s", "--logtostderr=true", "--v=2", "--v=4"]
    assert "--scale-down-enabled=false" in autoscaler.command_line("ca", "kc", AutoscalerSpec(scale_down=False), 1)
    assert "--scale-down-enabled=false" not in autoscaler.command_line("ca", "kc", AutoscalerSpec(), 1)


def test_the_environment_points_the_provider_at_the_kubeconfig_and_namespace():
    env = autoscaler.environment({"PATH": "/bin", "KWOK_PROVIDER_CONFIGMAP": "x", "KUBECONFIG": "/other"},
                                 Path("/k/kc"), "ns1")
    assert env == {"PATH": "/bin", "KWOK_PROVIDER_MODE": "local", "KUBECONFIG": "/k/kc", "POD_NAMESPACE": "ns1"}


@pytest.mark.parametrize("kwargs, field", [
    (dict(groups=()), "groups"),
    (dict(groups=("autoscaled",)), "groups"),
    (dict(groups=(AUTOSCALED, AUTOSCALED)), "groups: names must be distinct"),
    (dict(namespace="Bad_ns"), "namespace"),
    (dict(scan_interval=0), "scan_interval"),
    (dict(scale_down_unneeded_time=-1), "scale_down_unneeded_time"),
    (dict(max_node_provision_time="2m"), "max_node_provision_time"),
])
def test_bad_specs_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(ValueError) as err:
        AutoscalerSpec(**kwargs)
    assert str(err.value).startswith(field)


def test_spec_group_lookup():
    spec = AutoscalerSpec(groups=[AUTOSCALED])  # any iterable, kept as a tuple
    assert spec.groups == (AUTOSCALED,) and spec.group("autoscaled") is AUTOSCALED
    with pytest.raises(KeyError):
        spec.group("nope")


def test_group_of_reads_the_providers_annotation():
    assert autoscaler.group_of({"metadata": {"annotations": {autoscaler.NAME_ANNOTATION: "g"}}}) == "g"
    assert autoscaler.group_of({"metadata": {"annotations": {}}}) is None
    assert autoscaler.group_of({}) is None


#: The shape of the status ConfigMap's text as cluster-autoscaler 1.36.1 wrote it here (trimmed).
STATUS = """\
time: 2026-12-02 08:01:02.123456789 +0000 UTC
autoscalerStatus: Running
clusterWide:
  health:
    status: Healthy
    nodeCounts:
      registered: {total: 3, ready: 3, notStarted: 0}
      longUnregistered: 0
      unregistered: 0
nodeGroups:
- name: autoscaled
  health:
    status: Healthy
    nodeCounts:
      registered: {total: 2, ready: 1, notStarted: 1}
      longUnregistered: 0
      unregistered: 0
    cloudProviderTarget: 2
    minSize: 0
    maxSize: 4
- name: empty
  health:
    status: Healthy
    nodeCounts:
      longUnregistered: 1
      unregistered: 2
    cloudProviderTarget: 0
    minSize: 0
    maxSize: 1
"""


def test_parse_status_gives_each_groups_counts_and_target():
    t = "2026-12-02 08:01:02.123456789 +0000 UTC"
    assert autoscaler.parse_status(STATUS) == {"autoscaled": autoscaler.GroupView(2, 1, 2, 0, t),
                                               "empty": autoscaler.GroupView(0, 0, 0, 3, t)}
    with pytest.raises(ValueError):
        autoscaler.parse_status("just text")


# ------------------------------------------------------------------ the build's source snapshot

def test_the_autoscaler_is_built_from_its_snapshot_with_the_kwok_tag():
    assert versions.SOURCES == {"cluster-autoscaler": "cluster-autoscaler-1.36.1"}
    assert versions.TOOLS["cluster-autoscaler"][1] == versions.CLUSTER_AUTOSCALER == "1.36.1"
    assert versions.BUILD_TAGS["cluster-autoscaler"] == ("kwok",)
    assert build.bin_dir("cluster-autoscaler").name == "cluster-autoscaler-1.36.1"
    assert build.binary("cluster-autoscaler") == build.bin_dir("cluster-autoscaler") / "cluster-autoscaler"


def test_third_party_dir_is_the_repositorys_own_or_the_env_override(monkeypatch, tmp_path):
    monkeypatch.delenv(build.THIRD_PARTY_ENV, raising=False)
    repo = Path(build.__file__).resolve().parents[1]
    assert build.third_party_dir() == repo / "third_party"  # inside the checkout, never beside it
    assert build.source_dir("cluster-autoscaler") == repo / "third_party" / "cluster-autoscaler-1.36.1"
    assert autoscaler.crd_path().is_file()  # the ProvisioningRequest CRD the local autoscaler installs
    monkeypatch.setenv(build.THIRD_PARTY_ENV, str(tmp_path))
    assert build.third_party_dir() == tmp_path


def test_a_missing_snapshot_is_named_with_the_override(monkeypatch, tmp_path):
    monkeypatch.setenv(build.THIRD_PARTY_ENV, str(tmp_path))
    with pytest.raises(build.MissingSource) as err:
        build.source_dir("cluster-autoscaler")
    msg = str(err.value)
    assert str(tmp_path / "cluster-autoscaler-1.36.1") in msg and build.THIRD_PARTY_ENV in msg
    with pytest.raises(build.MissingSource):
        autoscaler.crd_path()
    assert isinstance(err.value, build.BuildError)  # `make binaries` reports it like a failed build


def test_the_snapshot_is_built_in_place_read_only_into_the_cache(monkeypatch, tmp_path):
    src = tmp_path / "third_party" / "cluster-autoscaler-1.36.1"
    src.mkdir(parents=True)
    (src / "go.mod").write_text("module k8s.io/autoscaler/cluster-autoscaler\n")
    monkeypatch.setenv(build.THIRD_PARTY_ENV, str(src.parent))
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path / "cache"))
    ran = []

    def run_go(cmd, cwd, log, goflags="-mod=mod"):
        ran.append((cmd, cwd, goflags))
        out = Path(cmd[cmd.index("-o") + 1])
        out.write_text("binary")

    monkeypatch.setattr(build, "run_go", run_go)
    assert build.build_tool("cluster-autoscaler") > 0
    out = build.bin_dir("cluster-autoscaler")
    assert ran == [(["go", "build", "-trimpath", "-ldflags", "-s -w", "-tags", "kwok", "-o",
                     str(out.with_name(out.name + ".tmp") / "cluster-autoscaler"), "."],
                    src, "-mod=readonly -buildvcs=false")]
    assert (out / "cluster-autoscaler").read_text() == "binary"
    assert sorted(p.name for p in src.iterdir()) == ["go.mod"]  # nothing written into the snapshot
    assert build.build_tool("cluster-autoscaler") == 0.0  # cached: not rebuilt
    assert len(ran) == 1


# ------------------------------------------------------------------ LocalCluster's argument

def test_local_cluster_takes_a_spec_or_node_groups_and_runs_none_by_default():
    from cogate.localcluster.cluster import ClusterError, LocalCluster

    assert LocalCluster().autoscaler is None
    small = NodeGroup("small", cpu=2000, memory=4 * GiB)
    assert LocalCluster(autoscaler=[small]).autoscaler == AutoscalerSpec(groups=(small,))
    spec = AutoscalerSpec(scale_down=False)
    assert LocalCluster(autoscaler=spec).autoscaler is spec
    assert LocalCluster(autoscaler=spec, extra_args={"cluster-autoscaler": ["--v=4"]}).extra_args == {
        "cluster-autoscaler": ["--v=4"]}
    with pytest.raises(ValueError, match="cluster-autoscaler"):
        LocalCluster(extra_args={"cluster-autoscaler": ["--v=4"]})  # no autoscaler to pass them to
    with pytest.raises(ValueError, match="groups"):
        LocalCluster(autoscaler=[])
    with pytest.raises(ClusterError, match="runs no autoscaler"):
        LocalCluster().restart_autoscaler()
