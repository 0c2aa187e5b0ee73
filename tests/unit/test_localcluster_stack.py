"""CogateStack (``cogate dev up``, ``cogate demo``, the e2e tests) starts the webhook with the
chart's default adopted scheduler names, so a local cluster admits pods as an install does."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogate import api
from cogate.localcluster.stack import CogateStack
from cogate.webhook import main as webhook_main


def _webhook_argv(stack: CogateStack, monkeypatch) -> list[str]:
    seen: list[list[str]] = []
    monkeypatch.setattr(stack, "_spawn", lambda name, args: seen.append(args) or object())
    monkeypatch.setattr(stack, "_wait_ready", lambda *a, **k: None)
    stack._write_certs()  # the webhook's certificate and the CA the readiness probe trusts
    stack.start_webhook()
    (argv,) = seen
    return argv


@pytest.mark.parametrize("kwargs, adopted", [
    ({}, list(api.DEFAULT_ADOPTED_SCHEDULER_NAMES)),
    ({"adopt_scheduler_names": ("a-sched", "b-sched")}, ["a-sched", "b-sched"]),
    ({"adopt_scheduler_names": ()}, []),
])
def test_stack_passes_adopted_scheduler_names_to_the_webhook(kwargs, adopted, tmp_path: Path, monkeypatch):
    stack = CogateStack(cluster=None, workdir=tmp_path, **kwargs)
    args = webhook_main.build_parser().parse_args(_webhook_argv(stack, monkeypatch))
    assert args.adopt_scheduler_names == adopted
    assert api.DEFAULT_ADOPTED_SCHEDULER_NAMES == ("scheduler-plugins-scheduler",)
