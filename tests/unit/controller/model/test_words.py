"""Words of the controller's messages (controller/model/words.py): how many members fit against
minMember (issue 29: never "fits 6 of 4")."""

from __future__ import annotations

import pytest

from cogate.controller.model.words import fits_of


@pytest.mark.parametrize("fits,min_member,text", [
    (0, 3, "fits 0 of 3"),
    (3, 4, "fits 3 of 4"),
    (4, 4, "fits 4 of 4"),
    (6, 4, "fits all 4 (room for 6)"),
    (3, 1, "fits all 1 (room for 3)"),
])
def test_fits_of(fits, min_member, text):
    assert fits_of(fits, min_member) == text
