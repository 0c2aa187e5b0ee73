"""``kube.features.build_caches`` (issue 28): the enabled features, asked in order, fill the caches."""

from __future__ import annotations

import pytest

from cogate.controller.kube.features import Feature, FeatureUnavailable, InformerSpec, Watches, build_caches
from cogate.controller.model.config import ReconcilerConfig

NO_SOURCE = (lambda: ([], ""), lambda rv: iter(()))


def spec(cache, name=None):
    return InformerSpec(cache, name or cache, NO_SOURCE, lambda raw: raw, lambda raw: raw)


def make(name, source, key, convert):
    return f"informer {name}"


def test_enabled_features_fill_their_fields_in_order_and_tuples_collect():
    asked = []

    def watches(*specs, **settings):
        def informers(apis, config, namespace):
            asked.append((specs[0].name if specs else "none", namespace))
            return Watches(specs, settings)
        return informers

    features = [
        Feature("core", watches(spec("podgroups"), spec("members"), spec("bound"), spec("nodes"))),
        Feature("off", watches(spec("budgets")), enabled=lambda config: config.preemption),
        Feature("admission", watches(spec("admission", "a"), spec("admission", "b"), admission_known=True)),
    ]
    caches = build_caches(features, None, ReconcilerConfig(preemption=False), "ns", make)
    assert asked == [("podgroups", "ns"), ("a", "ns")]
    assert (caches.podgroups, caches.nodes, caches.budgets) == ("informer podgroups", "informer nodes", None)
    assert caches.admission == ("informer a", "informer b") and caches.admission_known is True


def test_an_unavailable_feature_stops_the_build():
    def unavailable(apis, config, namespace):
        raise FeatureUnavailable("no CRD")

    later = Feature("later", lambda *a: pytest.fail("a later feature is not asked"))
    with pytest.raises(FeatureUnavailable, match="no CRD"):
        build_caches([Feature("needs a CRD", unavailable), later], None, ReconcilerConfig(), None, make)
