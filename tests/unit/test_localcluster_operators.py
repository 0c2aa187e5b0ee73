"""localcluster.operators (command lines) and the operators' builds (CRDs copied from the module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogate.localcluster import build, operators, versions


def test_mpi_operator_command_line_names_the_gang_scheduler_and_the_lock_namespace():
    argv = operators.mpi_operator_command_line("/bin/mpi-operator", "/tmp/kc", "default-scheduler")
    assert argv[0] == "/bin/mpi-operator"
    assert "--kubeConfig=/tmp/kc" in argv and "--lock-namespace=mpi-operator" in argv
    assert argv[-1] == "--gang-scheduling=default-scheduler"
    assert "--monitoring-port=0" in argv
    assert not [a for a in operators.mpi_operator_command_line("m", "k", None) if a.startswith("--gang")]
    with pytest.raises(ValueError, match="gang_scheduling"):
        operators.mpi_operator_command_line("m", "k", "")


def test_kuberay_command_line_binds_its_ports_on_loopback_without_leader_election():
    argv = operators.kuberay_command_line("/bin/ray-operator", "scheduler-plugins", 4100, 4101)
    assert argv == ["/bin/ray-operator", "--enable-leader-election=false", "--metrics-addr=127.0.0.1:4100",
                    "--health-probe-bind-address=127.0.0.1:4101", "--log-stdout-encoder=console",
                    "--batch-scheduler=scheduler-plugins"]
    assert not [a for a in operators.kuberay_command_line("r", None, 1, 2) if a.startswith("--batch")]
    for bad in (0, 70000, True, "80"):
        with pytest.raises(ValueError, match="metrics_port"):
            operators.kuberay_command_line("r", None, bad, 2)


def test_every_operator_tool_is_pinned_with_a_binary_and_its_crds():
    for tool in versions.OPERATOR_TOOLS:
        assert tool in versions.TOOLS and versions.BINARIES[tool] and versions.CRDS[tool]
        assert len(versions.CRDS[tool]) == len(operators.CRD_NAMES[tool])
        assert tool not in versions.CONTROL_PLANE_TOOLS  # `make demo` does not build them
    assert build.outputs("kuberay") == ("ray-operator", "ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml",
                                        "ray.io_rayservices.yaml")
    assert build.outputs("etcd") == ("etcd",)


def test_operator_unknown_tool_is_refused(tmp_path):
    with pytest.raises(ValueError, match="tool"):
        operators.Operator("volcano", object(), tmp_path, None)


def test_missing_crd_names_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    with pytest.raises(operators.OperatorError, match="python -m cogate.localcluster.build mpi-operator"):
        operators.Operator(operators.MPI_OPERATOR, object(), tmp_path / "w", None).apply_crds()


def fake_module(tmp_path: Path, crds: tuple[str, ...]) -> Path:
    mod = tmp_path / "mod"
    mod.mkdir()
    for crd in crds:
        (mod / crd).parent.mkdir(parents=True, exist_ok=True)
        (mod / crd).write_text(f"# {crd}\n")
    (mod / "go.mod").write_text("module example.com/op\n\ngo 1.25.0\n")
    return mod


def test_build_copies_the_crds_from_the_module_beside_the_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path / "cache"))
    crds = ("config/crd/a.yaml", "manifests/b.yaml")
    monkeypatch.setitem(versions.TOOLS, "fakeop", ("example.com/op", "v1.0.0", ("example.com/op/cmd/op",)))
    monkeypatch.setitem(versions.BINARIES, "fakeop", ("op",))
    monkeypatch.setitem(versions.CRDS, "fakeop", crds)
    mod = fake_module(tmp_path, crds)
    monkeypatch.setattr(build, "_module_info", lambda m, v, cwd: {"Dir": str(mod), "GoMod": str(mod / "go.mod")})

    def fake_go(cmd, cwd, log, goflags="-mod=mod"):
        if cmd[:2] == ["go", "build"]:
            out = Path(cmd[cmd.index("-o") + 1])
            (out / "op").write_text("binary")

    monkeypatch.setattr(build, "run_go", fake_go)
    assert build.build_tool("fakeop") >= 0
    assert sorted(p.name for p in build.bin_dir("fakeop").iterdir()) == ["a.yaml", "b.yaml", "op"]
    assert [p.read_text() for p in build.crd_paths("fakeop")] == ["# config/crd/a.yaml\n", "# manifests/b.yaml\n"]
    # a binary without its CRDs is not a cached build
    (build.bin_dir("fakeop") / "b.yaml").unlink()
    calls = []
    monkeypatch.setattr(build, "_build", lambda *a: calls.append(a[0]))
    build.build_tool("fakeop")
    assert calls == ["fakeop"]


def test_build_of_a_module_without_the_crd_says_which(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(versions.TOOLS, "fakeop", ("example.com/op", "v1.0.0", ("example.com/op/cmd/op",)))
    monkeypatch.setitem(versions.BINARIES, "fakeop", ("op",))
    monkeypatch.setitem(versions.CRDS, "fakeop", ("config/missing.yaml",))
    mod = fake_module(tmp_path, ())
    monkeypatch.setattr(build, "_module_info", lambda m, v, cwd: {"Dir": str(mod), "GoMod": str(mod / "go.mod")})
    monkeypatch.setattr(build, "run_go", lambda cmd, cwd, log, goflags="-mod=mod": None)
    with pytest.raises(build.BuildError, match=r"example.com/op@v1.0.0 has no config/missing.yaml"):
        build.build_tool("fakeop")


def test_training_operator_command_line_enables_pytorchjobs_only():
    argv = operators.training_operator_command_line("/bin/t", "default-scheduler", 9443, 4100, 4101)
    assert argv == ["/bin/t", "--enable-scheme=pytorchjob", "--webhook-server-port=9443",
                    "--metrics-bind-address=127.0.0.1:4100", "--health-probe-bind-address=127.0.0.1:4101",
                    "--leader-elect=false", "--gang-scheduler-name=default-scheduler"]
    assert not [a for a in operators.training_operator_command_line("t", None, 1, 2, 3) if a.startswith("--gang")]
    with pytest.raises(ValueError, match="webhook_port"):
        operators.training_operator_command_line("t", None, 0, 2, 3)


def test_training_webhook_configuration_points_the_pytorchjob_entry_at_loopback():
    import base64

    cfg = operators.training_webhook_configuration(9443, b"PEM")
    assert cfg["metadata"]["name"] == "validator.training-operator.kubeflow.org"  # what its rotator updates
    (hook,) = cfg["webhooks"]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:9443/validate-kubeflow-org-v1-pytorchjob",
                                    "caBundle": base64.b64encode(b"PEM").decode()}
    assert hook["rules"][0]["resources"] == ["pytorchjobs"] and hook["failurePolicy"] == "Fail"


def test_wait_http_accepts_the_statuses_asked_for_and_posts_data():
    """procs.wait_http(statuses=..., data=...): what the training-operator's webhook path wait uses
    (a 400 to an empty review is ready; a 404 is not)."""
    import http.server
    import subprocess
    import sys
    import threading

    from cogate.localcluster import procs

    answers = [404, 404, 400]
    seen: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            seen.append((self.command, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(answers.pop(0) if answers else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        proc = procs.Proc("sleeper", sleeper.pid, sys.executable, Path("/dev/null"), sleeper)
        procs.wait_http(proc, f"http://127.0.0.1:{server.server_port}/v", timeout=10, data=b"{}",
                        statuses=(200, 400))
        assert seen == [("POST", b"{}")] * 3
        answers[:] = [404] * 100
        with pytest.raises(RuntimeError, match="HTTP 404"):
            procs.wait_http(proc, f"http://127.0.0.1:{server.server_port}/v", timeout=0.5, data=b"{}",
                            statuses=(200, 400))
    finally:
        sleeper.kill()
        sleeper.wait()
        server.shutdown()


def test_jobset_runs_from_its_configuration_with_webhooks_on_loopback():
    assert operators.jobset_command_line("/bin/jobset", "/w/c.yaml") == \
        ["/bin/jobset", "--config=/w/c.yaml", "--metrics-bind-address=0", "--leader-elect=false"]
    cfg = operators.jobset_configuration(4200, 4201, "/w/certs")
    assert cfg["internalCertManagement"] == {"enable": False}
    assert cfg["webhook"] == {"port": 4200, "host": "127.0.0.1", "certDir": "/w/certs"}
    assert cfg["health"] == {"healthProbeBindAddress": "127.0.0.1:4201"}
    with pytest.raises(ValueError, match="probe_port"):
        operators.jobset_configuration(4200, 0, "/w/certs")
    mutating, validating = operators.jobset_webhook_configurations(4200, b"CA")
    hooks = {h["name"]: h for c in (mutating, validating) for h in c["webhooks"]}
    assert sorted(hooks) == ["mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"]
    assert all(h["clientConfig"]["url"].startswith("https://127.0.0.1:4200/") for h in hooks.values())
    # upstream's patches: the pod webhooks only for JobSet's pods (failure policy Fail)
    assert "objectSelector" not in hooks["mjobset.kb.io"]
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert hooks[name]["objectSelector"]["matchExpressions"][0]["key"] == "jobset.sigs.k8s.io/jobset-name"
