"""localcluster.build: concurrent builds of one tool are serialised and the second one is a cache hit."""

from __future__ import annotations

import threading
import time

from cogate.localcluster import build, versions


def test_concurrent_builds_of_one_tool_run_once(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(versions.TOOLS, "fake", ("example.com/fake", "v1.0.0", ("example.com/fake/cmd/fake",)))
    monkeypatch.setitem(versions.BINARIES, "fake", ("fake",))
    running = 0
    peak = 0
    calls = 0
    guard = threading.Lock()

    def fake_build(tool, module, version, packages, out, names, log):
        nonlocal running, peak, calls
        with guard:
            running += 1
            calls += 1
            peak = max(peak, running)
        time.sleep(0.2)
        out.mkdir(parents=True)
        (out / "fake").write_text("binary")
        with guard:
            running -= 1

    monkeypatch.setattr(build, "_build", fake_build)
    spent: list[float] = []
    threads = [threading.Thread(target=lambda: spent.append(build.build_tool("fake"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (calls, peak) == (1, 1)
    assert sorted(s > 0 for s in spent) == [False, False, False, True]
    assert (build.bin_dir("fake") / "fake").read_text() == "binary"


def test_debian_packages_present_are_not_installed(monkeypatch):
    from cogate.localcluster.host import debian

    monkeypatch.setattr(debian.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("apt ran")))
    assert debian.ensure_debian_packages({"coreutils": "/bin/ls", "python3": "python3"}, "test") == []


def test_missing_debian_packages_without_root_name_the_command(monkeypatch):
    import pytest

    from cogate.localcluster.host import debian

    monkeypatch.setattr(debian.os, "geteuid", lambda: 1000)
    with pytest.raises(debian.MissingPackages) as err:
        debian.ensure_debian_packages({"no-such-pkg": "/nonexistent/tool", "coreutils": "/bin/ls"}, "the real node")
    msg = str(err.value)
    assert "the real node needs the Debian packages no-such-pkg" in msg
    assert "apt-get install -y" in msg and "--no-install-recommends no-such-pkg`" in msg and "coreutils" not in msg
