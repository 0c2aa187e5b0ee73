"""model/readers: each JSON field reader reads a present value, reads absence (None) as its
default, and raises InvalidObject naming the field's path on a wrong type."""

import datetime as dt

import pytest

from cogate.controller.model import readers, records
from cogate.controller.model.readers import (InvalidObject, array, boolean, integer, mapping, mappings, parse_time,
                                             sections, string_map, text, texts)


def test_invalid_object_is_the_records_one_and_a_value_error():
    assert records.InvalidObject is InvalidObject
    assert issubclass(InvalidObject, ValueError)  # callers of stages/owners catch ValueError


@pytest.mark.parametrize("read,present,absent", [
    pytest.param(mapping, {"a": 1}, {}, id="mapping"),
    pytest.param(array, [1, "x"], [], id="array"),
    pytest.param(text, "x", "", id="text"),
    pytest.param(texts, ["a", "b"], (), id="texts"),
    pytest.param(string_map, {"k": "v"}, {}, id="string_map"),
    pytest.param(integer, 3, 0, id="integer"),
    pytest.param(boolean, True, False, id="boolean"),
])
def test_present_and_absent(read, present, absent):
    got = read(present, "spec.f")
    assert got == (tuple(present) if read is texts else present)
    assert read(None, "spec.f") == absent


@pytest.mark.parametrize("read,garbage,expected", [
    pytest.param(mapping, [1], "expected an object, got list", id="mapping"),
    pytest.param(array, {"a": 1}, "expected a list, got dict", id="array"),
    pytest.param(text, 5, "expected a string, got int", id="text"),
    pytest.param(integer, "3", "expected an integer, got '3'", id="integer-text"),
    pytest.param(integer, True, "expected an integer, got True", id="integer-bool"),
    pytest.param(integer, 1.5, "expected an integer, got 1.5", id="integer-float"),
    pytest.param(boolean, "true", "expected a boolean, got str", id="boolean"),
])
def test_wrong_type_names_the_path(read, garbage, expected):
    with pytest.raises(InvalidObject) as ei:
        read(garbage, "spec.containers[0].f")
    assert str(ei.value) == f"spec.containers[0].f: {expected}"


def test_defaults_are_the_callers():
    assert text(None, "p", "DoNotSchedule") == "DoNotSchedule"
    assert text("", "p", "DoNotSchedule") == ""  # only absence reads as the default
    assert integer(None, "p", 1) == 1
    assert integer(None, "p", None) is None  # absence told apart (owners: spec.completions)
    assert integer(0, "p", None) == 0
    assert boolean(None, "p", True) is True


def test_integer_minimum():
    assert integer(0, "p", minimum=0) == 0
    with pytest.raises(InvalidObject, match=r"^spec.replicas: expected a non-negative integer, got -1$"):
        integer(-1, "spec.replicas", 1, minimum=0)
    with pytest.raises(InvalidObject, match=r"^p: expected an integer of at least 2, got 1$"):
        integer(1, "p", minimum=2)
    assert integer(None, "p", 1, minimum=2) == 1  # the default is not checked


def test_mappings_yield_each_entry_with_its_path():
    assert list(mappings([{"a": 1}, None], "spec.tolerations")) == [
        ("spec.tolerations[0]", {"a": 1}), ("spec.tolerations[1]", {})]
    assert list(mappings(None, "spec.tolerations")) == []
    with pytest.raises(InvalidObject, match=r"^spec.tolerations\[1\]: expected an object, got str$"):
        list(mappings([{}, "x"], "spec.tolerations"))
    with pytest.raises(InvalidObject, match=r"^spec.tolerations: expected a list, got dict$"):
        list(mappings({}, "spec.tolerations"))


def test_texts_name_the_entry():
    assert texts(["a", None], "spec.values") == ("a", "")  # a null entry reads as ""
    with pytest.raises(InvalidObject, match=r"^spec.values\[1\]: expected a string, got int$"):
        texts(["a", 1], "spec.values")


def test_string_map_names_the_key():
    with pytest.raises(InvalidObject, match=r"^metadata.labels.k: expected a string value$"):
        string_map({"k": 1}, "metadata.labels")
    with pytest.raises(InvalidObject, match=r"^metadata.labels: expected an object, got list$"):
        string_map([], "metadata.labels")


def test_sections():
    meta, spec, status = sections({"metadata": {"name": "a"}, "spec": None}, "pod")
    assert (meta, spec, status) == ({"name": "a"}, {}, {})
    with pytest.raises(InvalidObject, match=r"^pod: expected an object, got list$"):
        sections([], "pod")
    with pytest.raises(InvalidObject, match=r"^status: expected an object, got str$"):
        sections({"status": "x"}, "pod")


def test_parse_time():
    assert parse_time("2024-01-01T00:00:00Z", "status.startTime") == 1704067200.0
    assert parse_time(None, "status.startTime") == parse_time("", "status.startTime") == 0.0
    assert parse_time(12, "p") == 12.0
    assert parse_time(dt.datetime(2024, 1, 1), "p") == 1704067200.0  # naive is UTC
    with pytest.raises(InvalidObject, match=r"^status.startTime: invalid timestamp 'soon'$"):
        parse_time("soon", "status.startTime")
    assert records.parse_time is parse_time


def test_every_public_reader_is_tested_here():
    assert set(readers.__all__) == {"InvalidObject", "mapping", "sections", "array", "mappings", "text", "texts",
                                    "string_map", "integer", "boolean", "parse_time"}
