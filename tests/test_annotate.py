"""Human annotations: blind export, import as judgments, clear errors."""

from __future__ import annotations

import csv
import json

import pytest

from cocoeval import InputError
from cocoeval.annotate import export_annotations, export_items, import_annotations
from cocoeval.schema import Continuation

from .sim_helpers import instance


def _run():
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    conts = {"simA": [Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1])
                      for i in insts]}
    return {"instances": insts, "continuations": conts}


def test_blind_export_then_import(tmp_path):
    run = _run()
    rep = export_items(run, tmp_path, seed=1)
    assert rep["items"] == 4 and rep["rows"] == 4 * 3 + 4
    items_text = (tmp_path / "items.jsonl").read_text()
    assert "simA" not in items_text and "reference" not in items_text and "idA" not in items_text
    key = json.loads((tmp_path / "key.json").read_text())
    assert sorted(v["target"] for v in key.values()) == ["reference", "reference", "simA", "simA"]
    order = [json.loads(x)["item_id"] for x in items_text.splitlines()]
    export_items(run, tmp_path / "other", seed=2)
    assert order != [json.loads(x)["item_id"] for x in (tmp_path / "other" / "items.jsonl").read_text().splitlines()]

    rows = list(csv.DictReader((tmp_path / "template.csv").open()))
    for r in rows:
        r["annotator"] = "ann1"
        if r["turn"] == "2":
            r["behaviours"] = "Repetition; off-topic"
        if not r["turn"]:
            r["consistency"], r["collaborativeness"] = "7", "5"
    with (tmp_path / "done.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=rows[0].keys())
        w.writeheader()
        w.writerows(rows)
    js = import_annotations(tmp_path / "done.csv", run, key=tmp_path / "key.json")
    fine = [j for j in js if j.kind == "fine_grained"]
    assert len(fine) == 4 and all(j.judge_id == "human:ann1" and j.status == "ok" for j in fine)
    assert all([lb.behaviours for lb in j.labels] == [[], ["repetition", "off_topic"], []] for j in fine)
    over = [j for j in js if j.kind == "overall"]
    assert len(over) == 4 and all((j.consistency, j.collaborativeness) == (7, 5) for j in over)
    assert {j.target for j in js} == {"reference", "idA"}

    # round trip through the non-blind format, as JSONL
    export_annotations(js, tmp_path / "again.jsonl")
    again = import_annotations(tmp_path / "again.jsonl", run)
    assert sorted(j.model_dump_json() for j in again) == sorted(j.model_dump_json() for j in js)


def test_partial_annotation_is_invalid_not_zero(tmp_path):
    run = _run()
    (tmp_path / "a.csv").write_text("annotator,instance_id,target,turn,behaviours\nann,d/c0/0,reference,1,\n")
    [j] = import_annotations(tmp_path / "a.csv", run)
    assert j.status == "invalid" and j.reason == "turns not annotated: 2, 3"


@pytest.mark.parametrize("row,needle", [
    ("ann,d/c0/0,reference,1,Sarcasm", "unknown behaviour 'Sarcasm'"),
    ("ann,d/c0/0,reference,9,", "turn must be 1-3"),
    ("ann,d/c0/0,nobody,1,", "no target 'nobody'"),
    (",d/c0/0,reference,1,", "no annotator"),
])
def test_bad_rows_name_file_and_row(tmp_path, row, needle):
    run = _run()
    (tmp_path / "bad.csv").write_text("annotator,instance_id,target,turn,behaviours\n" + row + "\n")
    with pytest.raises(InputError) as e:
        import_annotations(tmp_path / "bad.csv", run)
    assert needle in str(e.value) and "bad.csv" in str(e.value) and "row 2" in str(e.value)


def test_bad_likert_and_header(tmp_path):
    run = _run()
    (tmp_path / "l.csv").write_text("annotator,instance_id,target,turn,behaviours,consistency,collaborativeness\n"
                                    "ann,d/c0/0,reference,,,11,5\n")
    with pytest.raises(InputError, match="consistency must be an integer from 1 to 10"):
        import_annotations(tmp_path / "l.csv", run)
    (tmp_path / "h.csv").write_text("who,what\nx,y\n")
    with pytest.raises(InputError, match="CSV header lacks"):
        import_annotations(tmp_path / "h.csv", run)
