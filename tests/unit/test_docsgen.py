"""docs/reference/ is generated from the code (cogate/docsgen.py, `make docs`): the committed pages
equal what the code generates now, and each page says what it must (every metric, reason, value)."""

from __future__ import annotations

import pytest
import yaml

from cogate import docsgen
from cogate.controller.status import conditions, notices, waiting


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return docsgen.render_pages()


def test_committed_reference_pages_are_up_to_date(pages):
    diff = docsgen.check(pages=pages)
    assert not diff, f"docs/reference/ is out of date; run `make docs` and commit it:\n{diff}"


def test_check_reports_a_changed_page(tmp_path, pages):
    for name, text in pages.items():
        (tmp_path / name).write_text(text)
    assert docsgen.check(tmp_path, pages) == ""
    (tmp_path / "events.md").write_text("stale\n")
    diff = docsgen.check(tmp_path, pages)
    assert "-stale" in diff and "docs/reference/events.md (generated)" in diff


def test_every_metric_of_both_servers_is_listed(pages):
    page = pages["metrics.md"]
    for server, infos in docsgen.metric_catalogues().items():
        for m in infos:
            assert f"`{m.name}" in page, (server, m.name)
    for name in ("cogate_controller_groups_waiting", "cogate_controller_group_oldest_wait_seconds",
                 "cogate_build_info", "process_resident_memory_bytes",
                 "cogate_webhook_certificate_expiry_timestamp_seconds", "cogate_webhook_requests_total"):
        assert f"`{name}`" in page, name


def test_every_event_reason_condition_and_waiting_reason_is_listed(pages):
    for reason in notices.Reason:
        assert f"| `{reason.value}` |" in pages["events.md"], reason
    for name, value in vars(conditions).items():
        if name.startswith(("CONDITION_", "REASON_")):
            assert f"`{value}`" in pages["conditions.md"], name
    for r in waiting.REASONS:
        assert f"`{r}`" in pages["conditions.md"]
    assert "| 6 | `Pending` | otherwise |" in pages["conditions.md"]


def test_every_chart_value_is_listed_with_its_default(pages):
    page = pages["values.md"]
    values = yaml.safe_load((docsgen.ROOT / "charts" / "cogate" / "values.yaml").read_text())
    assert "| `monitoring.prometheusRule.gangWaitingSeconds` | `1800` | CogateGangWaitingTooLong" in page
    assert '| `controller.placement` | `"pinned"` |' in page
    for top in values:
        assert f"| `{top}" in page, top


def testvalue_comments_follow_nesting_and_multi_line_blocks():
    text = ("# -- top\n# continued\na:\n  # -- inner\n  b: 1\n  c: 2\n# plain comment\nd: {x: 1}\n"
            "e:\n  - item\n# -- f's\nf: 3\n")
    assert docsgen.value_comments(text) == {"a": "top continued", "a.b": "inner", "f": "f's"}
