"""The verdict vocabulary's small rules (controller/model/verdicts.py, pure)."""

from __future__ import annotations

from cogate.controller.model.verdicts import GroupVerdict, Outcome, with_note


def _verdict(message: str) -> GroupVerdict:
    return GroupVerdict("ns", "pg", Outcome.WAITING_FOR_MEMBERS, {}, 0, message)


def test_with_note_joins_the_message_and_the_note_with_a_semicolon():
    v = _verdict("1 of 3 members present")
    got = with_note(v, "quota full")
    assert got.message == "1 of 3 members present; quota full"
    assert v.message == "1 of 3 members present", "the verdict is frozen: a copy is returned"
    assert got == GroupVerdict("ns", "pg", Outcome.WAITING_FOR_MEMBERS, {}, 0, got.message)
    assert with_note(with_note(v, "a"), "b").message == "1 of 3 members present; a; b"


def test_with_note_puts_no_separator_next_to_an_empty_part():
    assert with_note(_verdict(""), "quota full").message == "quota full"
    v = _verdict("waiting")
    assert with_note(v, "") is v
