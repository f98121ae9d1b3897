"""An annotation CSV naming a column twice is refused (csv.DictReader keeps the last; issue #24)."""

from __future__ import annotations

import pytest

from cocoeval.annotate.rows import read_rows
from cocoeval.core.errors import InputError


def test_a_column_named_twice_is_refused_naming_file_and_column(tmp_path):
    p = tmp_path / "filled.csv"
    p.write_text("annotator,item_id,turn,behaviours,behaviours\nann,i1,1,agreement,none\n")
    with pytest.raises(InputError) as e:
        read_rows(p)
    assert "filled.csv" in str(e.value) and "'behaviours' more than once" in str(e.value)


def test_distinct_columns_read_as_before(tmp_path):
    p = tmp_path / "filled.csv"
    p.write_text("annotator,item_id,turn,behaviours\nann,i1,1,agreement\n")
    assert read_rows(p) == [("row 2", {"annotator": "ann", "item_id": "i1", "turn": "1", "behaviours": "agreement"})]
