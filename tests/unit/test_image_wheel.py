"""The wheel the Dockerfile builds holds only what the webhook, the controller and the certificate
bootstrap run: no ``cogate.localcluster`` (control plane, real node, image build) and no module
that runs apt-get, buildah or iptables. Built here as the Dockerfile does it (``pip wheel`` on
exactly the files its ``COPY`` lines take); ``tests/e2e/test_image.py`` checks the real image."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cogate.localcluster.host import image

from tests.image_contents import host_tool_modules, package_path

ROOT = image.repo_root()
#: controller/'s subject folders (docs/internals.md); setup.py must list each as a package.
CONTROLLER_FOLDERS = {"topology", "model", "planning", "status", "kube", "devices", "preemption", "provisioning", "release", "explain"}


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> dict[str, bytes]:
    """{path in the wheel: content} of the wheel built from the Dockerfile's build context."""
    tmp = tmp_path_factory.mktemp("image-wheel")
    context = tmp / "context"
    for src in image.dockerfile_inputs(ROOT):
        dest = context / src.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    out = tmp / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(out),
                           str(context)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("cogate-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_build_context_has_no_local_cluster():
    assert not [p for p in image.dockerfile_inputs(ROOT) if p.relative_to(ROOT).parts[0] == "localcluster"]


def test_wheel_holds_the_components_and_no_local_cluster(wheel_files):
    assert all(package_path(n) == n for n in wheel_files), "only the distribution's files"
    packages = {n.rsplit("/", 1)[0] for n in wheel_files if n.startswith("cogate/")}
    folders = {p.parent.name for p in (ROOT / "controller").glob("*/__init__.py")}
    assert folders == CONTROLLER_FOLDERS
    assert packages == {"cogate", "cogate/controller", "cogate/webhook", "cogate/certs",
                        *(f"cogate/controller/{f}" for f in CONTROLLER_FOLDERS)}
    assert not [n for n in wheel_files if n.endswith(".yaml")], "the CRD ships in the chart, not in the wheel"
    (record,) = [n for n in wheel_files if n.endswith(".dist-info/RECORD")]
    assert "localcluster" not in wheel_files[record].decode()


def test_no_module_in_the_wheel_runs_host_tools(wheel_files):
    assert host_tool_modules(wheel_files) == {}


def test_the_host_tool_check_sees_the_host_tooling():
    """The check flags the checkout's host tooling (so an empty answer above means something)."""
    host = ROOT / "localcluster" / "host"
    found = host_tool_modules({p.relative_to(ROOT).as_posix(): p.read_bytes() for p in host.glob("*.py")})
    assert set(found) == {"localcluster/host/debian.py", "localcluster/host/image.py",
                          "localcluster/host/realnode.py"}
    assert "apt-get" in found["localcluster/host/debian.py"] and "buildah" in found["localcluster/host/image.py"]
    assert "iptables" in found["localcluster/host/realnode.py"]
