"""The packages of the ``cogate`` distribution (everything else is in pyproject.toml).

A source checkout installs every component. The container image's build context (the
Dockerfile copies only what the webhook, the controller and the certificate bootstrap run)
has no ``localcluster/``, so its wheel leaves :data:`LOCAL_CLUSTER_PACKAGES` out: the local
control plane needs Go-built binaries the image does not carry, and its host tooling runs
apt-get, iptables and buildah as root, which the non-root image never may. There
``cogate demo`` and ``cogate dev`` say that the local control plane is not installed.
"""

from pathlib import Path

from setuptools import setup

#: The controller's subject folders (controller/*/; docs/internals.md).
CONTROLLER_FOLDERS = ["topology", "model", "planning", "status", "kube", "devices", "preemption", "provisioning", "release", "explain"]
#: What the image runs; always in the wheel.
PACKAGES = [
    "cogate",
    "cogate.controller",
    *(f"cogate.controller.{sub}" for sub in CONTROLLER_FOLDERS),
    "cogate.webhook",
    "cogate.certs",
]
#: The local control plane and its host tooling (the real node, the pause image, the image build).
LOCAL_CLUSTER_PACKAGES = ["cogate.localcluster", "cogate.localcluster.host"]

HERE = Path(__file__).resolve().parent

setup(packages=PACKAGES + (LOCAL_CLUSTER_PACKAGES if (HERE / "localcluster").is_dir() else []))
