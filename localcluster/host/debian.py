"""Debian packages the host tooling needs, installed with apt-get when they are missing.

The real node (:mod:`.realnode`: runc, CNI plugins, iptables) and the image build
(:mod:`.image`: buildah, mmdebstrap, strace for its checks) run tools of the host's Debian.
The code that needs them installs them, not a CI script, so ``make test``, CI and
``cogate dev up --real-node`` take one path; a user without root gets the exact ``apt-get``
command instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Mapping

__all__ = ["MissingPackages", "ensure_debian_packages"]


class MissingPackages(RuntimeError):
    """Host packages are missing and cannot be installed here (not root, no apt-get, apt-get failed)."""


#: Debian's hook that maintainer scripts ask before starting a service (invoke-rc.d, deb-systemd-invoke).
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


@contextlib.contextmanager
def _no_service_starts(path: Path = POLICY_RC_D) -> Iterator[None]:
    """Forbid service starts (``exit 101``) while installing, unless ``path`` already exists. One
    installer at a time on the host (a lock beside ``path``'s use), so that one cannot remove the
    policy while another installs."""
    with open("/run/cogate-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            yield
            return
        path.write_text("#!/bin/sh\n# written by cogate while it installs test packages; removed after\nexit 101\n")
        path.chmod(0o755)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def _present(probe: str) -> bool:
    return Path(probe).exists() if probe.startswith("/") else shutil.which(probe) is not None


def ensure_debian_packages(wanted: Mapping[str, str], purpose: str, *, recommends: bool = False,
                           log=None) -> list[str]:
    """Install the Debian packages of ``wanted`` that are missing; returns those installed.

    ``wanted`` maps a package name to what shows it is installed: an absolute path, or a
    command looked up on ``PATH``. Missing ones are installed with ``apt-get install -y``
    (``--no-install-recommends`` unless ``recommends``), after one ``apt-get update`` if the
    first attempt fails (a fresh machine has no package lists). Raises :class:`MissingPackages`
    naming the packages and ``purpose`` when not root, when there is no apt-get, or when they
    are still missing afterwards.

    No service a package ships is started (a package that brings a daemon, as ``prometheus``
    does for ``promtool``, would otherwise start it on a host with systemd): while apt-get runs,
    :data:`POLICY_RC_D` forbids every ``invoke-rc.d``/``deb-systemd-invoke`` start (Debian
    Policy 9.3.3, exit 101), unless the host has its own policy file, which is then left alone.
    """
    missing = [pkg for pkg, probe in wanted.items() if not _present(probe)]
    if not missing:
        return []
    cmd = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=600",
           *([] if recommends else ["--no-install-recommends"]), *missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise MissingPackages(f"{purpose} needs the Debian packages {', '.join(missing)}: "
                              f"run `{' '.join(cmd)}` as root")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

    def apt(argv: list[str]) -> subprocess.CompletedProcess:
        if log is not None:
            print(f"+ {' '.join(argv)}", file=log, flush=True)
        return subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)

    with _no_service_starts():
        proc = apt(cmd)
        if proc.returncode != 0:
            apt(["apt-get", "update", "-q"])
            proc = apt(cmd)
    still = [pkg for pkg, probe in wanted.items() if not _present(probe)]
    if proc.returncode != 0 or still:
        out = "\n".join(((proc.stdout or "") + (proc.stderr or "")).splitlines()[-20:])
        raise MissingPackages(f"{purpose}: `{' '.join(cmd)}` left {still or missing} missing "
                              f"(exit code {proc.returncode}):\n{out}")
    return missing
