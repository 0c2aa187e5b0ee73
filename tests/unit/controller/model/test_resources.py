"""Quantities and kube-scheduler effective requests (controller/model/resources.py)."""

from fractions import Fraction

import pytest

from cogate.controller.model.resources import (
    QuantityError,
    effective_request,
    format_quantity,
    parse_quantity,
    to_units,
)

Gi = 2**30
Mi = 2**20


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("1500m", Fraction(3, 2)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("+2", Fraction(2)),
        ("-2", Fraction(-2)),
        ("-100m", Fraction(-1, 10)),
        ("5n", Fraction(5, 10**9)),
        ("5u", Fraction(5, 10**6)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(Mi)),
        ("1.5Gi", Fraction(3 * Gi, 2)),
        ("2Ti", Fraction(2 * 2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("2.5e+2", Fraction(250)),
        ("123456789012345678901234567890", Fraction(123456789012345678901234567890)),
        (3, Fraction(3)),
        (0.1, Fraction(1, 10)),
        (2.5, Fraction(5, 2)),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "garbage",
    ["", " ", "abc", "1K", "1 Gi", " 1", "1 ", "1e", "1ee3", "1Gii", ".", "-", "+", "1..2", "1mi", "Gi", "0x10",
     "1e3.5", "1.2.3", "∞", True, None, [1], {"a": 1}, float("nan"), float("inf")],
)
def test_parse_quantity_rejects_garbage_naming_the_text(garbage):
    with pytest.raises(QuantityError) as ei:
        parse_quantity(garbage)
    assert repr(garbage) in str(ei.value)


def test_quantity_error_is_value_error():
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    "resource,q,units",
    [
        ("cpu", Fraction(1, 10), 100),
        ("cpu", Fraction(1, 10000), 1),  # 0.1m rounds up to 1m
        ("cpu", Fraction(2), 2000),
        ("memory", Fraction(1, 2), 1),  # rounds up
        ("memory", Fraction(Gi), Gi),
        ("nvidia.com/gpu", Fraction(3), 3),
        ("memory", Fraction(-3, 2), -2),  # away from zero
    ],
)
def test_to_units(resource, q, units):
    assert to_units(resource, q) == units


def c(requests=None, limits=None, restart=None):
    res = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    out = {"name": "x", "resources": res}
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    "spec,expected",
    [
        pytest.param({"containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "500m"})]},
                     {"cpu": 1500, "memory": Gi}, id="sum-of-containers"),
        pytest.param({"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "3"}), c({"cpu": "2"})]},
                     {"cpu": 3000}, id="init-larger-than-containers"),
        pytest.param({"containers": [c({"cpu": "4"})], "initContainers": [c({"cpu": "3"})]},
                     {"cpu": 4000}, id="containers-larger-than-init"),
        pytest.param({"containers": [c({"cpu": "1", "memory": "1Gi"})],
                      "initContainers": [c({"memory": "3Gi"})]},
                     {"cpu": 1000, "memory": 3 * Gi}, id="max-per-resource"),
        pytest.param({"containers": [c({"cpu": "1"})],
                      "initContainers": [c({"cpu": "500m"}, restart="Always")]},
                     {"cpu": 1500}, id="native-sidecar-adds"),
        pytest.param({"containers": [c({"cpu": "1"})],
                      "initContainers": [c({"cpu": "1"}, restart="Always"), c({"cpu": "2"})]},
                     {"cpu": 3000}, id="sidecar-before-plain-init-adds-to-it"),
        pytest.param({"containers": [c({"cpu": "1"})],
                      "initContainers": [c({"cpu": "2"}), c({"cpu": "1"}, restart="Always")]},
                     {"cpu": 2000}, id="sidecar-after-plain-init-does-not"),
        pytest.param({"containers": [c({"cpu": "100m"})],
                      "initContainers": [c({"cpu": "1"}, restart="Always"), c({"cpu": "1"}, restart="Always"),
                                         c({"cpu": "500m"})]},
                     {"cpu": 2500}, id="two-sidecars-then-init"),
        pytest.param({"containers": [c({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "64Mi"}},
                     {"cpu": 1250, "memory": 64 * Mi}, id="overhead"),
        pytest.param({"containers": [c(limits={"cpu": "2", "memory": "1Gi"})]},
                     {"cpu": 2000, "memory": Gi}, id="limits-only"),
        pytest.param({"containers": [c({"cpu": "1"}, {"cpu": "2", "memory": "1Gi"})]},
                     {"cpu": 1000, "memory": Gi}, id="requests-win-over-limits-per-resource"),
        pytest.param({"containers": [c({"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi", "ephemeral-storage": "1G"})]},
                     {"nvidia.com/gpu": 2, "hugepages-2Mi": 4 * Mi, "ephemeral-storage": 10**9}, id="extended"),
        pytest.param({"containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "1"})],
                      "resources": {"requests": {"cpu": "3"}}},
                     {"cpu": 3000, "memory": Gi}, id="pod-level-requests"),
        pytest.param({"containers": [c()]}, {}, id="no-requests"),
        pytest.param({}, {}, id="empty-spec"),
        pytest.param({"containers": [c({"cpu": "0"})]}, {}, id="zero-omitted"),
    ],
)
def test_effective_request(spec, expected):
    assert effective_request(spec) == expected


@pytest.mark.parametrize(
    "spec,field",
    [
        ({"containers": [c({"cpu": "lots"})]}, "spec.containers[0].resources.requests.cpu"),
        ({"containers": [c(), c(limits={"memory": "1GB"})]}, "spec.containers[1].resources.limits.memory"),
        ({"initContainers": [c({"cpu": "x"})]}, "spec.initContainers[0].resources.requests.cpu"),
        ({"overhead": {"cpu": "?"}}, "spec.overhead.cpu"),
        ({"containers": "nope"}, "spec.containers"),
        ({"containers": [{"resources": []}]}, "spec.containers[0].resources"),
    ],
)
def test_effective_request_errors_name_the_field(spec, field):
    with pytest.raises(QuantityError) as ei:
        effective_request(spec)
    assert field in str(ei.value)


@pytest.mark.parametrize(
    "resource,units,text",
    [
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1500m"),
        ("memory", 3 * Gi, "3Gi"),
        ("memory", 1536 * Mi, "1.5Gi"),
        ("memory", 512 * Mi, "512Mi"),
        ("memory", 100, "100"),
        ("ephemeral-storage", 2 * Gi, "2Gi"),
        ("nvidia.com/gpu", 4, "4"),
    ],
)
def test_format_quantity(resource, units, text):
    assert format_quantity(resource, units) == text
