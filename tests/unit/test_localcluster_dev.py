"""What ``cogate dev up`` and ``cogate demo`` build and start, from their arguments, without a cluster:
the control plane's Go tools only (never Helm nor the operators, the real node's only with ``--real-node``), and
cogate's CRD and processes unless ``--no-cogate``."""

from __future__ import annotations

import pytest

from cogate.localcluster import autoscaler, build, demo, dev, versions


def _plan(*argv: str) -> dev.UpPlan:
    return dev.plan(dev.build_parser().parse_args(["up", *argv]), environ={})


def test_control_plane_tools_are_not_the_real_nodes_nor_helm():
    assert set(versions.CONTROL_PLANE_TOOLS) == {"etcd", "kubernetes", "kwok"}
    assert not set(versions.NODE_TOOLS) & set(versions.CONTROL_PLANE_TOOLS)
    assert not set(versions.AUTOSCALER_TOOLS) & set(versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS)
    assert not set(versions.OPERATOR_TOOLS) & set(versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS
                                                  + versions.AUTOSCALER_TOOLS)
    assert set(versions.TOOLS) - set(versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS
                                     + versions.AUTOSCALER_TOOLS + versions.OPERATOR_TOOLS
                                     + versions.CERT_MANAGER_TOOLS + versions.BENCH_TOOLS) == {"helm"}


@pytest.mark.parametrize("argv, tools, real_node, cogate", [
    ((), versions.CONTROL_PLANE_TOOLS, False, True),
    (("--no-cogate",), versions.CONTROL_PLANE_TOOLS, False, False),
    (("--real-node",), versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS, True, True),
    (("--real-node", "--no-cogate"), versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS, True, False),
    (("--no-cogate", "--cogate"), versions.CONTROL_PLANE_TOOLS, False, True),  # the last one wins
])
def test_dev_up_plan(argv, tools, real_node, cogate):
    assert _plan(*argv) == dev.UpPlan(tools=tools, real_node=real_node, cogate=cogate)


PROVISIONING = ("--provisioning-class", "best-effort-atomic-scale-up.autoscaling.x-k8s.io")


@pytest.mark.parametrize("argv, tools, cogate, controller_args", [
    (("--autoscaler",), versions.CONTROL_PLANE_TOOLS + versions.AUTOSCALER_TOOLS, True, PROVISIONING),
    (("--autoscaler", "--no-cogate"), versions.CONTROL_PLANE_TOOLS + versions.AUTOSCALER_TOOLS, False, ()),
])
def test_dev_up_plan_with_the_autoscaler(argv, tools, cogate, controller_args):
    assert _plan(*argv) == dev.UpPlan(tools=tools, real_node=False, cogate=cogate, autoscaler=dev.DEV_AUTOSCALER,
                                      controller_args=controller_args)
    assert dev.DEV_AUTOSCALER.groups == (autoscaler.AUTOSCALED,)
    assert (dev.DEV_AUTOSCALER.scale_down, dev.DEV_AUTOSCALER.scale_down_unneeded_time,
            dev.DEV_AUTOSCALER.scale_down_delay_after_add) == (True, 60.0, 60.0)


def test_controller_args_the_controller_does_not_know_are_left_out():
    flags = dev.controller_flags()
    assert {"--gate-name", "--kubeconfig"} <= flags
    assert dev.supported_controller_args(PROVISIONING, {"--gate-name"}) == ((), ["--provisioning-class"])
    assert dev.supported_controller_args(PROVISIONING, {"--provisioning-class"}) == (PROVISIONING, [])


class _Asked(list):
    """The tool lists asked for; ``versions``: the ``kubernetes_version`` of each request."""

    versions: list


def _stop_at_build(monkeypatch, module) -> _Asked:
    """Record what ``module`` asks ``build.ensure_binaries`` for, then fail the build (nothing starts)."""
    asked = _Asked()
    versions_asked: list[str | None] = []

    def ensure_binaries(tools=None, log=None, kubernetes_version=None):
        asked.append(list(tools))
        versions_asked.append(kubernetes_version)
        raise build.BuildError("stopped by the test")

    monkeypatch.setattr(module.build, "ensure_binaries", ensure_binaries)
    asked.versions = versions_asked
    return asked


@pytest.mark.parametrize("argv", [["up"], ["up", "--no-cogate"], ["up", "--real-node", "--no-cogate"],
                                  ["up", "--autoscaler"]])
def test_dev_up_builds_what_its_plan_says(argv, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COGATE_DEV_DIR", str(tmp_path))
    monkeypatch.delenv(versions.KUBERNETES_VERSION_ENV, raising=False)
    asked = _stop_at_build(monkeypatch, dev)
    assert dev.main(argv) == 1
    assert asked == [list(_plan(*argv[1:]).tools)]
    assert "stopped by the test" in capsys.readouterr().err


def test_demo_builds_the_control_plane_only(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))  # nothing cached: demo asks for a build
    asked = _stop_at_build(monkeypatch, demo)
    assert demo.main([]) == 1
    assert asked == [list(versions.CONTROL_PLANE_TOOLS)]


# ------------------------------------------------------------------ Kubernetes releases (issue 18)

@pytest.mark.parametrize("argv, environ, release, gates", [
    ((), {}, versions.DEFAULT_RELEASE, {}),
    (("--kubernetes-version", "1.37.2"), {}, "v1.37.2", {}),
    (("--kubernetes-version", "v1.37.2"), {}, "v1.37.2", {}),
    ((), {versions.KUBERNETES_VERSION_ENV: "1.37.2"}, "v1.37.2", {}),
    # the flag wins over the environment
    (("--kubernetes-version", "1.36.3"), {versions.KUBERNETES_VERSION_ENV: "1.37.2"}, "v1.36.3", {}),
    (("--kubernetes-version", "1.37.2", "--feature-gates", "GenericWorkload=true"), {}, "v1.37.2",
     {"GenericWorkload": True}),
    ((), {versions.FEATURE_GATES_ENV: "GenericWorkload=true"}, versions.DEFAULT_RELEASE, {"GenericWorkload": True}),
    (("--feature-gates", "GenericWorkload=false"), {versions.FEATURE_GATES_ENV: "GenericWorkload=true"},
     versions.DEFAULT_RELEASE, {"GenericWorkload": False}),
])
def test_dev_up_plan_selects_the_release_and_gates(argv, environ, release, gates):
    todo = dev.plan(dev.build_parser().parse_args(["up", *argv]), environ=environ)
    assert (todo.kubernetes_version, dict(todo.feature_gates)) == (release, gates)
    assert todo.tools == versions.CONTROL_PLANE_TOOLS


def test_dev_up_with_an_unknown_release_lists_the_supported_ones(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COGATE_DEV_DIR", str(tmp_path))
    asked = _stop_at_build(monkeypatch, dev)
    assert dev.main(["up", "--kubernetes-version", "1.29.0"]) == 2
    err = capsys.readouterr().err
    assert asked == [] and "'1.29.0' is not supported" in err
    assert all(v.lstrip("v") in err for v in versions.RELEASES)


def test_dev_up_builds_the_selected_release(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COGATE_DEV_DIR", str(tmp_path))
    asked = _stop_at_build(monkeypatch, dev)
    assert dev.main(["up", "--kubernetes-version", "1.37.2"]) == 1
    assert asked.versions == ["v1.37.2"]
