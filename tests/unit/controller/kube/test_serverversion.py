"""The start-up release check (controller/kube/serverversion.py)."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from cogate.controller.kube import serverversion
from cogate.controller.kube.metrics import Metrics
from cogate.controller.model.releases import FEATURES


def gauge_values(metrics: Metrics) -> dict[str, float]:
    return {s.labels["feature"]: s.value for m in metrics.registry.collect() if m.name.endswith("feature_supported")
            for s in m.samples}


def test_an_old_release_names_each_feature_it_loses(caplog):
    m = Metrics(CollectorRegistry())
    with caplog.at_level(logging.WARNING, logger="cogate.controller"):
        assert serverversion.report("v1.33.5-eks-1", m.cluster_features) == (1, 33)
    values = gauge_values(m)
    assert {k for k, v in values.items() if v == 0} == {"native_gangs", "native_preemption", "preemption_nomination", "dra"}
    assert set(values) == {f.name for f in FEATURES}
    text = caplog.text
    assert "older than 1.35, which preemption_nomination needs (KEP-5278" in text and "DoesNotFitAfterPreemption" in text
    assert "older than 1.34, which dra needs" in text


def test_a_current_release_loses_nothing(caplog):
    m = Metrics(CollectorRegistry())
    with caplog.at_level(logging.WARNING, logger="cogate.controller"):
        serverversion.report("v1.36.3", m.cluster_features)
    assert set(gauge_values(m).values()) == {1.0} and "older than" not in caplog.text


def test_below_the_minimum_is_refused():
    with pytest.raises(serverversion.TooOld, match=r"Kubernetes v1.29.9; cogate needs 1.30 or later"):
        serverversion.report("v1.29.9")


def test_an_unreadable_version_assumes_support(caplog):
    m = Metrics(CollectorRegistry())
    with caplog.at_level(logging.WARNING, logger="cogate.controller"):
        assert serverversion.report("weird", m.cluster_features) is None
    assert "cannot read the Kubernetes release" in caplog.text and set(gauge_values(m).values()) == {1.0}


def test_check_survives_an_unreachable_api_server(caplog):
    class Broken:
        def call_api(self, *a, **k):
            raise ConnectionError("refused")

        def select_header_accept(self, *a):
            return "application/json"

    with caplog.at_level(logging.WARNING, logger="cogate.controller"):
        assert serverversion.check(Broken()) is None
    assert "cannot read the API server's version" in caplog.text
