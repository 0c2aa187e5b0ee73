"""The container image, built from the Dockerfile (``make image``), checked without a cluster.

The image is built (or found cached) with :func:`cogate.localcluster.host.image.build_image`.
Its commands run the way the chart runs them: as the image's user (10001:10001), on a
read-only root filesystem, with nothing writable but an in-memory ``/certs`` owned by group
10001 (the chart's ``emptyDir`` with ``fsGroup: 10001``). Each run is traced with ``strace``:
no file system call that could write may be attempted outside ``/certs``, ``/dev`` and
``/proc`` (a read-only root hides failed attempts, e.g. Python writing bytecode, so
"it exited 0" alone would not show them).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest

from cogate.localcluster.host import image

from tests.image_contents import host_tool_modules, package_path

pytestmark = pytest.mark.e2e

#: File system calls that create, change or remove something (``open*`` only with a write flag).
WRITE_SYSCALLS = ("creat", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
                  "rmdir", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod", "fchmodat",
                  "chown", "lchown", "fchownat", "utimensat", "mknod", "mknodat", "setxattr", "lsetxattr")
OPEN_SYSCALLS = ("open", "openat", "openat2")
WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND")
#: Paths the runtime provides writable or virtual in a pod.
ALLOWED_PREFIXES = ("/dev/", "/proc/", "/certs/")


@pytest.fixture(scope="module")
def built() -> image.ImageBuild:
    image.ensure_tools(tools={"strace": "strace"})
    return image.build_image()


def _write_attempts(trace: str) -> list[str]:
    """Lines of an ``strace -f`` log that create, change or remove a file outside ALLOWED_PREFIXES."""
    bad = []
    for line in trace.splitlines():
        m = re.match(r"^\d+\s+(\w+)\((.*)$", line)
        if not m:
            continue
        call, args = m.groups()
        paths = re.findall(r'"([^"]*)"', args)
        if call in OPEN_SYSCALLS:
            if not WRITE_FLAGS.search(args):
                continue
        elif call not in WRITE_SYSCALLS:
            continue
        if paths and all(p.startswith(ALLOWED_PREFIXES) or p in ("/dev/null", "/certs") for p in paths):
            continue
        bad.append(line)
    return bad


def run_in_image(ref: str, args: list[str], work: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the image's entrypoint with ``args`` like a container of the chart; returns the
    process (text output) and the write attempts :func:`_write_attempts` finds.

    A private mount namespace gets the image's root file system (``buildah mount``) bound
    read-only (an overlay without upper layer, adding the ``/certs`` mount point), ``/proc``,
    ``/dev`` and a tmpfs ``/certs`` (mode 0770, group 10001); the
    entrypoint runs under ``chroot --userspec`` as the image's ``User`` with exactly the
    image's ``Env`` (plus ``HOME`` from its ``/etc/passwd``, as container runtimes set it).
    """
    config = image.image_config(ref)
    user = config.get("User", "")
    assert re.fullmatch(r"\d+:\d+", user), f"image user must be numeric uid:gid, got {user!r}"
    container = subprocess.run(["buildah", "from", "--pull=never", ref], capture_output=True, text=True,
                               check=True).stdout.strip()
    try:
        rootfs = subprocess.run(["buildah", "mount", container], capture_output=True, text=True,
                                check=True).stdout.strip()
        uid = user.split(":")[0]
        home = "/"
        for entry in Path(rootfs, "etc/passwd").read_text().splitlines():
            fields = entry.split(":")
            if len(fields) > 5 and fields[2] == uid:
                home = fields[5]
        root = work / "root"
        root.mkdir(exist_ok=True)
        trace = work / "strace.log"
        env = [*config.get("Env", []), f"HOME={home}"]
        argv = [*config.get("Entrypoint", []), *args]
        # The runtime creates mount points for the pod's volumes: a read-only overlay adds /certs.
        extra = work / "mountpoints"
        (extra / "certs").mkdir(parents=True, exist_ok=True)
        gid = user.split(":")[1]
        q = shlex.quote
        script = "\n".join([
            "set -e",
            f"mount -t overlay overlay -o ro,lowerdir={q(str(extra))}:{q(rootfs)} {q(str(root))}",
            f"mount -t proc proc {q(str(root / 'proc'))}",
            f"mount --rbind /dev {q(str(root / 'dev'))}",
            f"mount -t tmpfs -o mode=0770,uid=0,gid={gid},size=1m certs {q(str(root / 'certs'))}",
            f"exec strace -f -qq -o {q(str(trace))} -e trace={','.join(OPEN_SYSCALLS + WRITE_SYSCALLS)} "
            f"env -i {' '.join(q(e) for e in env)} chroot --userspec={q(user)} --groups={gid} {q(str(root))} "
            + " ".join(q(a) for a in argv),
        ])
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "--fork", "--pid",
                               "sh", "-c", script], capture_output=True, text=True, timeout=120)
        attempts = _write_attempts(trace.read_text()) if trace.exists() else ["(no strace log)"]
        return proc, attempts
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)


def test_build_is_cached_and_tagged_as_the_chart_expects(built):
    assert built.tag == f"localhost/cogate:{image.app_version()}"
    assert built.containerd_name == f"docker.io/library/cogate:{image.app_version()}"
    assert built.archive.is_file() and built.archive.name == f"cogate-{image.app_version()}-{built.inputs}.tar"
    again = image.build_image()
    assert again.cached and again.archive == built.archive and again.inputs == built.inputs


def test_archive_is_an_oci_layout_containerd_names(built):
    with tarfile.open(built.archive) as tar:
        names = set(tar.getnames())
        assert json.load(tar.extractfile("oci-layout"))["imageLayoutVersion"] == "1.0.0"
        index = json.load(tar.extractfile("index.json"))
        (desc,) = index["manifests"]
        assert desc["annotations"][image.CONTAINERD_NAME_ANNOTATION] == built.containerd_name
        assert desc["annotations"]["org.opencontainers.image.ref.name"] == image.app_version()

        def blob(d: dict) -> bytes:
            algo, digest = d["digest"].split(":")
            data = tar.extractfile(f"blobs/{algo}/{digest}").read()
            assert len(data) == d["size"] and hashlib.new(algo, data).hexdigest() == digest, d
            return data

        manifest = json.loads(blob(desc))
        config = json.loads(blob(manifest["config"]))
        for layer in manifest["layers"]:
            assert f"blobs/{layer['digest'].replace(':', '/')}" in names
            blob(layer)
    assert config["config"]["User"] == "10001:10001"
    assert config["config"]["Entrypoint"] == ["cogate"]
    assert "PYTHONDONTWRITEBYTECODE=1" in config["config"]["Env"]
    assert not [e for e in config["config"]["Env"] if e.startswith("PIP_")], "no pip settings in the image"
    assert config["config"]["Labels"][image.INPUTS_LABEL] == built.inputs


def test_build_settings_stay_out_of_the_image(built, tmp_path):
    container = subprocess.run(["buildah", "from", "--pull=never", built.tag], capture_output=True, text=True,
                               check=True).stdout.strip()
    try:
        root = Path(subprocess.run(["buildah", "mount", container], capture_output=True, text=True,
                                   check=True).stdout.strip())
        # buildah leaves an empty file where it mounted the build's pip.conf
        assert not (root / "etc/pip.conf").exists() or (root / "etc/pip.conf").stat().st_size == 0
        assert not (root / "wheels").exists() and not (root / "src").exists()
        assert (root / "usr/local/bin/cogate").is_file()
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)


@pytest.mark.parametrize("args, expect", [
    (["--help"], "usage: cogate <command>"),
    (["--version"], "cogate "),
    (["webhook", "--help"], "--tls-cert-file"),
    (["controller", "--help"], "--leader-elect"),
    (["certs", "--help"], "bootstrap"),
    (["certs", "bootstrap", "--help"], "--webhook-config-name"),
])
def test_commands_run_as_non_root_on_a_read_only_root(built, tmp_path, args, expect):
    proc, attempts = run_in_image(built.tag, args, tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert expect in proc.stdout
    assert "Traceback" not in proc.stderr and "Read-only file system" not in proc.stderr, proc.stderr
    assert attempts == [], "\n".join(attempts)


def test_certificates_written_only_to_the_certs_volume(built, tmp_path):
    """Real work in the image (cryptography's native code, file output) as the chart's init container does it."""
    proc, attempts = run_in_image(built.tag, ["certs", "generate", "--out", "/certs",
                                              "--dns", "cogate-webhook.cogate-system.svc"], tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert attempts == [], "\n".join(attempts)


def _package_files(archive: Path) -> dict[str, bytes]:
    """{path: content} of the ``cogate`` distribution's files in the image (``cogate/...`` and
    ``cogate-<version>.dist-info/...``, see :func:`package_path`), read from the OCI archive's
    layers in order (a later layer's file wins; a whiteout removes)."""
    files: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        (desc,) = json.load(tar.extractfile("index.json"))["manifests"]
        manifest = json.load(tar.extractfile(f"blobs/{desc['digest'].replace(':', '/')}"))
        for layer in manifest["layers"]:
            data = tar.extractfile(f"blobs/{layer['digest'].replace(':', '/')}").read()
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as layer_tar:
                for member in layer_tar:
                    head, _, base = member.name.rpartition("/")
                    if base.startswith(".wh."):
                        gone = package_path(f"{head}/{base.removeprefix('.wh.')}")
                        files = {k: v for k, v in files.items() if not gone or (k != gone and not k.startswith(gone + "/"))}
                    elif member.isfile() and (path := package_path(member.name)):
                        files[path] = layer_tar.extractfile(member).read()
    return files


def test_image_holds_no_local_cluster_and_no_host_tooling(built):
    """The installed distribution (its files in the image's layers, and its RECORD) has no
    ``cogate.localcluster`` and no module that runs apt-get, buildah or iptables."""
    files = _package_files(built.archive)
    assert {"cogate/cli.py", "cogate/controller/main.py", "cogate/webhook/main.py", "cogate/certs/bootstrap.py"} <= set(files)
    assert not [p for p in files if p.startswith("cogate/localcluster/")]
    (record,) = [p for p in files if p.endswith(".dist-info/RECORD")]
    assert "cogate/cli.py" in files[record].decode() and "localcluster" not in files[record].decode()
    assert host_tool_modules(files) == {}


@pytest.mark.parametrize("args", [["demo"], ["dev", "up"]])
def test_local_cluster_commands_say_they_are_not_installed(built, tmp_path, args):
    proc, attempts = run_in_image(built.tag, args, tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert f"cogate {args[0]}: the local control plane is not installed in this image" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert attempts == [], "\n".join(attempts)


def test_the_write_check_sees_a_write(built, tmp_path):
    """The tracer catches a write attempt on the read-only root (so an empty list above means something)."""
    proc, attempts = run_in_image(built.tag, ["certs", "generate", "--out", "/var/tmp/x", "--dns", "a.b"], tmp_path)
    assert proc.returncode != 0
    assert any("/var/tmp/x" in a for a in attempts), attempts
