"""The real node's pure parts: the OCI archive writer, archive names, generated configuration."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from cogate.localcluster.host import pauseimage, realnode
from cogate.localcluster.cluster import LocalCluster


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_oci_archive_is_reproducible_and_self_consistent(tmp_path):
    files = {"/pause": (b"\x7fELF fake", 0o755)}
    a = pauseimage.write_oci_archive(tmp_path / "a.tar", "localhost/x/y:1", files, ["/pause"], arch="amd64")
    b = pauseimage.write_oci_archive(tmp_path / "b.tar", "localhost/x/y:1", files, ["/pause"], arch="amd64")
    assert a.read_bytes() == b.read_bytes()
    blobs = _members(a)
    index = json.loads(blobs["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/x/y:1"
    manifest_bytes = blobs[f"blobs/sha256/{entry['digest'].split(':')[1]}"]
    assert len(manifest_bytes) == entry["size"]
    manifest = json.loads(manifest_bytes)
    config = json.loads(blobs[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause"] and config["architecture"] == "amd64"
    layer_gz = blobs[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    import gzip

    layer = gzip.decompress(layer_gz)
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (member,) = tar.getmembers()
        assert member.name == "pause" and member.mode == 0o755
        assert tar.extractfile(member).read() == b"\x7fELF fake"


def test_archive_refs_reads_oci_and_docker_archives(tmp_path):
    oci = pauseimage.write_oci_archive(tmp_path / "oci.tar", "localhost/cogate/x:2", {"/a": (b"a", 0o644)}, ["/a"])
    assert realnode._archive_refs(oci) == ["localhost/cogate/x:2"]
    docker = tmp_path / "docker.tar"
    with tarfile.open(docker, "w") as tar:
        data = json.dumps([{"Config": "c.json", "RepoTags": ["localhost/cogate/img:dev"], "Layers": []}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert realnode._archive_refs(docker) == ["localhost/cogate/img:dev"]
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    with pytest.raises(realnode.NodeSetupError, match="not a readable image archive"):
        realnode._archive_refs(tmp_path / "junk.tar")


def test_kubelet_configuration_for_this_host(tmp_path):
    cfg = realnode._kubelet_config(tmp_path, tmp_path / "c.sock", tmp_path, tmp_path / "ca.crt", 1234, 1235)
    assert cfg["failCgroupV1"] is False and cfg["cgroupDriver"] == "cgroupfs"
    assert cfg["registerWithTaints"] == [realnode.NODE_TAINT]
    assert cfg["address"] == realnode.NODE_IP and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["anonymous"]["enabled"] is False and cfg["authorization"]["mode"] == "Webhook"
    assert cfg["imageGCHighThresholdPercent"] == 100, "imported images must never be garbage-collected"


def test_cni_and_kube_proxy_configuration_stay_off_the_network(tmp_path):
    bridge = realnode._cni_config(tmp_path)["plugins"][0]
    assert bridge["bridge"] == realnode.BRIDGE and bridge["isGateway"] is False and bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": realnode.POD_SUBNET, "gateway": realnode.NODE_IP}]]
    proxy = realnode._kube_proxy_config(tmp_path / "kc", 1, 2)
    assert proxy["mode"] == "iptables" and proxy["nodePortAddresses"] == [f"{realnode.NODE_IP}/32"]
    assert proxy["healthzBindAddress"].startswith("127.0.0.1:") and proxy["iptables"]["localhostNodePorts"] is False


def test_containerd_configuration_keeps_state_in_the_work_dir(tmp_path):
    import tomllib

    cfg = tomllib.loads(realnode._containerd_config(tmp_path, tmp_path / "c.sock", tmp_path / "net.d", "localhost/p:1"))
    assert cfg["root"].startswith(str(tmp_path)) and cfg["state"].startswith(str(tmp_path))
    assert cfg["imports"] == []
    plugins = cfg["plugins"]
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "localhost/p:1"
    runc = plugins["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is False and runc["Root"].startswith(str(tmp_path))
    assert plugins["io.containerd.cri.v1.runtime"]["netns_mounts_under_state_dir"] is True


def test_node_extra_args_need_a_real_node():
    with pytest.raises(ValueError, match="kubelet"):
        LocalCluster(extra_args={"kubelet": ["--v=4"]})
    LocalCluster(extra_args={"kubelet": ["--v=4"]}, real_node=True)  # accepted; nothing started


# -- recovery after a dead owner ------------------------------------------------------------

def test_read_owner_absent_malformed_and_valid(tmp_path):
    path = tmp_path / "owner.json"
    assert realnode.read_owner(path) is None
    path.write_text("{not json")
    assert realnode.read_owner(path) == {}
    path.write_text("[1, 2]")
    assert realnode.read_owner(path) == {}
    path.write_text(json.dumps({"dir": "/w", "pids": {"12": None}, "sysctls": {"vm/panic_on_oom": "0"}}))
    assert realnode.read_owner(path) == {"dir": "/w", "pids": {"12": None}, "sysctls": {"vm/panic_on_oom": "0"}}


@pytest.mark.parametrize("pids, running, live", [
    ({}, set(), []),
    ({"10": None, "11": "/bin/kubelet"}, set(), []),                       # all dead: recover
    ({"10": None, "11": "/bin/kubelet"}, {(10, None)}, [10]),              # the starting process runs
    ({"10": None, "11": "/bin/kubelet"}, {(11, "/bin/kubelet")}, [11]),    # a node process runs
    ({"11": "/bin/kubelet", "12": "/bin/containerd"}, {(11, "/bin/kubelet"), (12, "/bin/containerd")}, [11, 12]),
    ({"x": None, "11": ""}, {(11, None)}, [11]),                           # bad pid skipped, "" binary = by pid
])
def test_live_owner_pids(pids, running, live):
    calls = []

    def alive(pid, binary):
        calls.append((pid, binary))
        return (pid, binary) in running

    assert realnode.live_owner_pids({"pids": pids}, alive) == live
    assert all(isinstance(pid, int) for pid, _ in calls)


def test_live_owner_pids_malformed_record_counts_as_dead():
    assert realnode.live_owner_pids({}, lambda p, b: True) == []
    assert realnode.live_owner_pids({"pids": [1, 2]}, lambda p, b: True) == []


class _Recorded:
    """Stands in for the host side effects of RealNode (sweep, teardown) and records calls."""

    def __init__(self, monkeypatch, tmp_path, *, leftovers_after=()):
        self.calls: list[tuple[str, str, dict]] = []
        owner = tmp_path / "owner.json"
        monkeypatch.setattr(realnode, "OWNER_FILE", owner)
        self.owner = owner
        monkeypatch.setattr(realnode, "host_leftovers", lambda workdir=None: ["network interface cogate0"])

        def sweep(node):
            assert node.host_ready, "the sweep runs only on a node that owns the host"
            self.calls.append(("sweep", str(node.dir), dict(node.sysctls)))

        def teardown(node):
            self.calls.append(("teardown", str(node.dir), dict(node.sysctls)))
            owner.unlink(missing_ok=True)
            return list(leftovers_after)

        monkeypatch.setattr(realnode.RealNode, "_sweep", sweep)
        monkeypatch.setattr(realnode.RealNode, "teardown_host", teardown)


def test_recover_host_without_owner_touches_nothing(monkeypatch, tmp_path):
    rec = _Recorded(monkeypatch, tmp_path)
    assert realnode.recover_host(log=None) == []
    assert rec.calls == []


def test_recover_host_removes_a_dead_owners_leftovers(monkeypatch, tmp_path):
    rec = _Recorded(monkeypatch, tmp_path)
    rec.owner.write_text(json.dumps({"dir": "/w/node", "pids": {"999999999": None},
                                     "sysctls": {"vm/overcommit_memory": "0"}}))
    log = io.StringIO()
    assert realnode.recover_host(log=log) == ["network interface cogate0"]
    assert rec.calls == [("sweep", "/w/node", {"vm/overcommit_memory": "0"}),
                         ("teardown", "/w/node", {"vm/overcommit_memory": "0"})]
    assert "owner of /w/node is gone" in log.getvalue() and "cogate0" in log.getvalue()
    assert not rec.owner.exists()


def test_recover_host_refuses_while_the_owner_runs(monkeypatch, tmp_path):
    import os

    rec = _Recorded(monkeypatch, tmp_path)
    rec.owner.write_text(json.dumps({"dir": "/w/node", "pids": {str(os.getpid()): None}}))
    with pytest.raises(realnode.NodeSetupError, match=rf"another real node runs.*/w/node.*\[{os.getpid()}\]"):
        realnode.recover_host(log=None)
    assert rec.calls == [] and rec.owner.exists()


def test_recover_host_names_what_it_could_not_remove(monkeypatch, tmp_path):
    rec = _Recorded(monkeypatch, tmp_path, leftovers_after=["mount /w/node/rootfs"])
    rec.owner.write_text("garbage")  # unreadable record: no live pids, no work dir
    with pytest.raises(realnode.NodeSetupError, match=r"could not remove.*mount /w/node/rootfs"):
        realnode.recover_host(log=None)
    assert [c[0] for c in rec.calls] == ["sweep", "teardown"] and rec.calls[0][1] == "/nonexistent"
