"""`make test`'s workers (pytest-xdist ``--dist loadgroup``): each test file runs whole on one worker,
and the files that use what the host has only one of share one group (tests/conftest.py).

The grouping silently stops when pytest-xdist cannot name the groups (pytest 9.2's node ids:
pytest-xdist #1386): then two workers would each start a real node. So this runs pytest on two
workers over two real test files and reads where each test ran.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


def test_host_exclusive_files_share_one_group_and_every_other_file_is_its_own():
    e2e = ROOT / "tests" / "e2e"
    groups = {conftest.xdist_group(e2e / name) for name in conftest.HOST_EXCLUSIVE}
    assert groups == {conftest.HOST_GROUP}
    assert conftest.xdist_group(e2e / "test_example.py") == "e2e/test_example.py"
    assert conftest.xdist_group(ROOT / "tests/unit/test_gates.py") == "unit/test_gates.py"


def test_two_workers_run_each_file_whole_on_one_worker():
    files = ["tests/unit/test_localcluster_phases.py", "tests/unit/test_gates.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                           "-v", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    ran = re.findall(r"^\[(gw\d)\] .*? PASSED (tests/\S+?)::\S+@(\S+)", proc.stdout, re.M)
    workers: dict[str, set[str]] = {}
    for worker, path, group in ran:
        assert group == path.removeprefix("tests/"), (path, group)
        workers.setdefault(path, set()).add(worker)
    assert set(workers) == set(files)
    assert all(len(w) == 1 for w in workers.values()), workers
