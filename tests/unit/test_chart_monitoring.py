"""The chart's opt-in monitoring: ServiceMonitor, PrometheusRule (checked and unit-tested with
promtool), the Grafana dashboard ConfigMap; and every metric their queries name exists.

promtool is Debian's ``prometheus`` package: installed with apt-get when missing (as the real node's
packages are, :func:`cogate.localcluster.host.debian.ensure_debian_packages`); a user without root
gets the exact command. The rule tests are tests/unit/promtool/rules_test.yaml.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cogate.docsgen import metric_catalogues
from cogate.localcluster.host.debian import ensure_debian_packages
from cogate.metrics import series_names

from .test_chart import CHART, NAMESPACE, RELEASE, _template, all_of, find, helm, render  # noqa: F401 - fixture

ON = ("--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
      "--set", "monitoring.dashboard.enabled=true")
PROMTOOL_TESTS = Path(__file__).parent / "promtool" / "rules_test.yaml"
#: Metrics the rules and dashboard read that cogate does not export: Prometheus' own target
#: health, and the API server's count of webhook calls it rejected (timeouts, refused connections).
EXTERNAL = {"up", "apiserver_admission_webhook_rejection_count"}
MONITORING = {"ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def monitored(helm) -> list[dict]:  # noqa: F811 - the helm fixture
    return render(helm, *ON)


@pytest.fixture(scope="module")
def promtool() -> str:
    ensure_debian_packages({"prometheus": "promtool"}, "the chart's alert rule tests (promtool)")
    return shutil.which("promtool") or "promtool"


def test_monitoring_is_off_by_default(helm):  # noqa: F811
    objs = render(helm)
    assert not [o for o in objs if o["kind"] in MONITORING]
    assert not [o for o in all_of(objs, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]


def test_service_monitor_scrapes_both_metrics_services(monitored):
    sm = find(monitored, "ServiceMonitor")
    sel = sm["spec"]["selector"]
    (expr,) = sel["matchExpressions"]
    services = [s for s in all_of(monitored, "Service")
                if all(s["metadata"]["labels"].get(k) == v for k, v in sel["matchLabels"].items())
                and s["metadata"]["labels"].get(expr["key"]) in expr["values"]]
    scraped = [s["metadata"]["name"] for s in services if any(p["name"] == "metrics" for p in s["spec"]["ports"])]
    assert sorted(scraped) == ["cogate-controller-metrics", "cogate-webhook-metrics"]
    assert sm["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}]
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_monitoring_labels_and_values_reach_the_objects(helm):  # noqa: F811
    objs = render(helm, *ON, "--set", "monitoring.serviceMonitor.labels.release=prom",
                  "--set", "monitoring.prometheusRule.labels.release=prom",
                  "--set", "monitoring.prometheusRule.alertLabels.team=platform",
                  "--set", "monitoring.prometheusRule.gangWaitingSeconds=600",
                  "--set", "monitoring.serviceMonitor.interval=", "--set", "monitoring.dashboard.namespace=grafana")
    assert find(objs, "ServiceMonitor")["metadata"]["labels"]["release"] == "prom"
    assert "interval" not in find(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    rule = find(objs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prom"
    rules = rule["spec"]["groups"][0]["rules"]
    assert all(r["labels"]["team"] == "platform" and r["labels"]["severity"] for r in rules)
    (wait,) = [r for r in rules if r["alert"] == "CogateGangWaitingTooLong"]
    assert wait["expr"].endswith("> 600")
    assert find(objs, "ConfigMap", "cogate-dashboard")["metadata"]["namespace"] == "grafana"


def test_service_monitor_needs_the_metrics_services(helm):  # noqa: F811
    proc = _template(helm, *ON, "--set", "metrics.service.enabled=false", check=False)
    assert proc.returncode != 0 and "monitoring.serviceMonitor.enabled needs metrics.service.enabled" in proc.stderr


def test_dashboard_config_map_holds_the_dashboard_for_the_grafana_sidecar(monitored):
    cm = find(monitored, "ConfigMap", "cogate-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (CHART / "dashboards" / "cogate.json").read_text()
    assert json.loads(cm["data"]["cogate.json"]) == json.loads(shipped)


def _rules(objs: list[dict]) -> dict:
    return {"groups": find(objs, "PrometheusRule")["spec"]["groups"]}


def test_alert_rules_pass_promtool_check_and_unit_tests(monitored, promtool, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(monitored)))
    shutil.copy(PROMTOOL_TESTS, tmp_path / "rules_test.yaml")
    check = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([promtool, "test", "rules", "rules_test.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert test.returncode == 0, test.stdout + test.stderr


def test_every_alert_has_a_unit_test_and_a_runbook_entry(monitored):
    alerts = {r["alert"] for r in _rules(monitored)["groups"][0]["rules"]}
    tested = {t["alertname"] for case in yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
              for t in case.get("alert_rule_test", ())}
    assert alerts == tested
    runbook = (CHART.parents[1] / "docs" / "monitoring.md").read_text().lower()
    for alert in alerts:
        assert f"### {alert.lower()}" in runbook, alert


# -- metric names in PromQL ---------------------------------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
             "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers left once strings, label matchers,
    ranges, Grafana variables, grouping clauses, function calls and keywords are removed."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\$\{?\w+\}?", "", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"(?<![A-Za-z0-9_:])\d+(\.\d+)?(e[+-]?\d+)?", " ", e, flags=re.I)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if m.group().lower() in _KEYWORDS or rest.startswith("("):
            continue
        names.add(m.group())
    return names


@pytest.mark.parametrize("expr,names", [
    ('max by (reason) (cogate_x{job=~"a|b", reason="y"}) > 1800', {"cogate_x"}),
    ("histogram_quantile(0.99, sum by (le) (rate(h_bucket{ns=\"$namespace\"}[$__rate_interval])))", {"h_bucket"}),
    ("a * on (pod) group_left () max by (pod) (b) * 1000", {"a", "b"}),
    ("absent(up{job=\"c\"}) or min(x) - time() < 1e+06", {"up", "x"}),
])
def test_metric_names_of_an_expression(expr, names):
    assert metric_names(expr) == names


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return {s for infos in metric_catalogues().values() for m in infos for s in series_names(m)}


def test_every_metric_the_alerts_read_is_exported(monitored, exported):
    rules = _rules(monitored)["groups"][0]["rules"]
    used = {n for r in rules for n in metric_names(r["expr"])}
    assert "cogate_controller_group_oldest_wait_seconds" in used
    assert used - exported - EXTERNAL == set()


def test_every_metric_the_dashboard_reads_is_exported(exported):
    dash = json.loads((CHART / "dashboards" / "cogate.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", ())]
    assert len(exprs) >= 20
    used = {n for e in exprs for n in metric_names(e)}
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            used.add(re.match(r"label_values\((\w+)", var["query"]["query"]).group(1))
    assert {"cogate_controller_groups_waiting", "cogate_build_info", "process_resident_memory_bytes"} <= used
    assert used - exported - EXTERNAL == set()
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
