"""CEL device selectors (controller/devices/cel.py): the Kubernetes DRA environment on cel-python."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogate.controller.devices.cel import DeviceView, Quantity, Semver, compile_selector

GI = 2**30
GPU = DeviceView(
    "gpu.example.com",
    attributes={"gpu.example.com": {"model": "a100", "index": 3, "healthy": True, "driverVersion": Semver("1.2.3")},
                "pci.example.com": {"slot": "0000:3b:00.0"}},
    capacity={"gpu.example.com": {"memory": Quantity(Fraction(80 * GI)), "cores": Quantity(Fraction(3, 2))}},
)


@pytest.mark.parametrize("expr,want", [
    ('device.driver == "gpu.example.com"', True),
    ('device.driver == "nic.example.com"', False),
    ('device.attributes["gpu.example.com"].model == "a100"', True),
    ('device.attributes["gpu.example.com"].model != "a100"', False),
    ('device.attributes["gpu.example.com"].index > 2', True),
    ('device.attributes["gpu.example.com"].index >= 4', False),
    ('device.attributes["gpu.example.com"].healthy', True),
    ('device.attributes["pci.example.com"].slot.startsWith("0000:3b")', True),
    ('device.attributes["gpu.example.com"].model in ["a100", "h100"]', True),
    ('device.attributes["gpu.example.com"].model.matches("^h")', False),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["gpu.example.com"].missing)', False),
    ('"pci.example.com" in device.attributes', True),
    ('"other.example.com" in device.attributes', False),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) == 0', True),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("100Gi"))', False),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("100Gi"))', True),
    ('device.capacity["gpu.example.com"].memory == quantity("80Gi")', True),
    ('device.capacity["gpu.example.com"].memory == quantity("81920Mi")', True),
    ('device.capacity["gpu.example.com"].cores == quantity("1500m")', True),
    ('device.capacity["gpu.example.com"].cores.isInteger()', False),
    ('device.capacity["gpu.example.com"].memory.asInteger() == 85899345920', True),
    ('device.capacity["gpu.example.com"].cores.asApproximateFloat() > 1.4', True),
    ('device.capacity["gpu.example.com"].cores.sign() == 1', True),
    ('device.capacity["gpu.example.com"].cores.add(quantity("500m")) == quantity("2")', True),
    ('device.capacity["gpu.example.com"].memory.sub(quantity("80Gi")).sign() == 0', True),
    ('isQuantity("10Gi") && !isQuantity("ten")', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.2"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.10.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.2.3")) == 0', True),
    ('device.attributes["gpu.example.com"].driverVersion == semver("1.2.3+build.5")', True),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 1 && '
     'device.attributes["gpu.example.com"].driverVersion.minor() == 2 && '
     'device.attributes["gpu.example.com"].driverVersion.patch() == 3', True),
    ('isSemver("1.2.3") && !isSemver("1.2")', True),
    ('device.allowMultipleAllocations', False),
])
def test_selector_values(expr, want):
    s = compile_selector(expr)
    assert s.unchecked == ""
    assert s.matches(GPU) is want


@pytest.mark.parametrize("expr", [
    'device.attributes["gpu.example.com"].missing == 1',      # attribute the device lacks
    'device.attributes["other.example.com"].model == "a100"',  # domain the device lacks
    'device.attributes["gpu.example.com"].model > 3',          # wrong type
    'device.capacity["gpu.example.com"].memory.compareTo(semver("1.0.0")) > 0',
    'device.capacity["gpu.example.com"].cores.asInteger() == 1',  # not an integer
    'quantity("ten") == quantity("10")',
    '1',                                                       # not a bool
    '"true"',
])
def test_runtime_errors_do_not_match(expr):
    """kube-scheduler's allocator fails on a CEL runtime error: the device is not counted."""
    s = compile_selector(expr)
    assert s.unchecked == ""
    assert s.matches(GPU) is False


@pytest.mark.parametrize("expr,why", [
    ("", "empty expression"),
    ("   ", "empty expression"),
    ('device.driver ==', "CEL does not compile"),
    ('device.attributes["gpu.example.com"].model.lowerAscii() == "a100"', "CEL function lowerAscii not modelled"),
    ('foo(device) && bar(1)', "CEL functions bar, foo not modelled"),
])
def test_unchecked(expr, why):
    s = compile_selector(expr)
    assert s.unchecked.startswith(why)
    with pytest.raises(ValueError, match="unchecked"):
        s.matches(GPU)


def test_function_names_inside_strings_are_not_calls():
    s = compile_selector('device.attributes["gpu.example.com"].model != "lowerAscii(x)"')
    assert s.unchecked == ""
    assert s.matches(GPU) is True


def test_compiled_once():
    assert compile_selector('device.driver == "x"') is compile_selector('device.driver == "x"')


@pytest.mark.parametrize("lo,hi", [
    ("1.0.0", "2.0.0"), ("1.9.0", "1.10.0"), ("1.0.0-alpha", "1.0.0"), ("1.0.0-alpha", "1.0.0-alpha.1"),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta"), ("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-rc.1", "1.0.0"),
])
def test_semver_precedence(lo, hi):
    """semver 2.0.0, section 11 (its own examples)."""
    assert Semver(lo) < Semver(hi)
    assert not Semver(hi) < Semver(lo)


@given(st.integers(0, 10**12), st.integers(0, 10**12))
def test_quantity_comparison_is_exact(a, b):
    d = DeviceView("d", capacity={"d": {"m": Quantity(Fraction(a))}})
    s = compile_selector(f'device.capacity["d"].m.compareTo(quantity("{b}")) == {(a > b) - (a < b)}')
    assert s.matches(d) is True
