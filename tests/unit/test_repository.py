"""What the repository itself holds: no tracked text file names a development machine's files,
and docs/README.md indexes every file under docs/.

A path under a developer's home or work directory (``/work``, ``/root``, ``/home/<user>``,
``/Users/<user>``) means nothing on another machine; say it relative to the repository
(``.venv/bin/python bench/run.py``, ``third_party/...``) or through an environment
variable (``$COGATE_CACHE_DIR``, ``~/.cache/cogate``). Paths the code uses at run time, in a
container or on a node (``/usr/lib/cni``, ``/etc/...``, ``/var/lib/...``, ``/proc``, ``/sys``,
``/dev``, ``/tmp``), are not machine paths and are not looked at. Nor is ``third_party/``: other
projects' sources, kept as their authors wrote them (``third_party/README.md``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: An absolute path under a home or work directory, not part of a longer path or URL
#: (``https://host/work/x``, ``../work/x``, ``$HOME/work/x`` and ``~/work/x`` do not count).
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])/(?:(?:work|root)/|(?:home|Users)/[^/\s]+/)")


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of ``text`` that names a machine path."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(line)]


def tracked_files() -> list[str]:
    """Every path git tracks here (relative to the repository); skips the test outside a checkout."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in out.decode().split("\0") if name]


def tracked_text_files() -> dict[str, str]:
    """Path -> text of every file git tracks here that is text (no NUL byte, UTF-8)."""
    texts = {}
    for name in tracked_files():
        try:
            data = (REPO / name).read_bytes()
        except OSError:  # deleted in the working tree, or a directory (submodule)
            continue
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


@pytest.mark.parametrize("line", [
    "    /work/venv/bin/pytest tests/e2e",
    "Read `/work/shared/DESIGN.md` first",
    '"binaries in /root/.cache/cogate/bin/x"',
    "cd /home/alice/src/cogate",
    "(/Users/bob/cogate/bench/run.py)",
])
def test_machine_paths_are_found(line):
    assert machine_paths(line)


@pytest.mark.parametrize("line", [
    "hostPath: /usr/lib/cni and /etc/cni/net.d, /var/lib/kubelet, /proc/self/status, /sys/fs/cgroup, /dev/null",
    "--cert-dir /tmp/k8s-webhook-server/serving-certs",
    ".venv/bin/python bench/run.py --out /tmp/b/benchmarks.md",
    "third_party/scheduler-plugins-v0.34.7, ../sibling/x and ~/.cache/cogate/bin/",
    "https://example.com/work/x and https://github.com/root/repo",
    "$HOME/work/cogate, ~/work/cogate, /home and /homework/x",
])
def test_run_time_and_relative_paths_are_not_machine_paths(line):
    assert machine_paths(line) == []


#: Paths inside a container image, not of a machine: file -> the only such lines' prefix (the MPI
#: operator's mpi-pi image runs as user mpiuser, home /home/mpiuser: its ssh keys, sshd config, program).
IMAGE_PATHS = {"examples/mpijob.yaml": "/home/mpiuser/"}


def test_no_tracked_text_file_names_a_machine_path():
    texts = tracked_text_files()
    assert "pyproject.toml" in texts
    this = Path(__file__).resolve().relative_to(REPO).as_posix()  # its examples above are machine paths
    found = {name: hits for name, text in texts.items() if name != this and not name.startswith("third_party/")
             and (hits := [(n, line) for n, line in machine_paths(text)
                           if name not in IMAGE_PATHS or machine_paths(line.replace(IMAGE_PATHS[name], ""))])}
    assert not found, "machine paths in tracked files (say them relative to the repository):\n" + "\n".join(
        f"{name}:{n}: {line}" for name, hits in sorted(found.items()) for n, line in hits)


def test_docs_index_lists_every_file_in_docs():
    index = (REPO / "docs" / "README.md").read_text()
    files = [name for name in tracked_files() if name.startswith("docs/")]
    missing = [f for f in files if f"]({f.removeprefix('docs/')})" not in index]
    assert "docs/semantics.md" in files and not missing, f"not in docs/README.md: {missing}"
