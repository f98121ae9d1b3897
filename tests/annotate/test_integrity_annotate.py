"""Annotation imports refuse what would be silently wrong (#24): an annotator name with an
invisible or direction-changing character (it becomes a file name), and a key.json entry without
its instance or target (an InputError naming the file and the item, exit 2; never a crash)."""

from __future__ import annotations

import csv
import json

import pytest

from cocoeval.annotate.exchange import export_items, import_into_run, read_key
from cocoeval.cli import main
from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Continuation
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run
from cocoeval.run.humans import judge_name_problem, name_problem

from ..sim_helpers import instance

HEAD = "annotator,instance_id,target,turn,behaviours,consistency,collaborativeness\n"


def run_dir(tmp_path):
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    d = tmp_path / "run"
    write_jsonl(d / "instances.jsonl", insts)
    write_jsonl(
        d / "continuations" / "simA.jsonl",
        [Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts],
    )
    tax = load_taxonomy()
    write_json(d / "manifest.json", {"taxonomy": {"name": tax.name, "hash": tax.hash}})
    return d


@pytest.mark.parametrize(
    "name", ["ann\u202e1", "\u202dann", "ann\u2066x\u2069", "ann\u200bone", "a\ufeffb", "ann\u2028x", "ann\u00adx"]
)
def test_an_annotator_name_with_an_invisible_or_bidi_character_is_refused(name):
    why = name_problem(name)
    assert why is not None and "U+" in why
    assert judge_name_problem(name) is not None


@pytest.mark.parametrize("name", ["ann1", "Zoë", "李雷", "علی\u200cرضا", "Anne-Marie O'Neil"])
def test_plain_names_of_any_script_are_kept(name):
    assert name_problem(name) is None


def test_importing_rows_of_a_bidi_annotator_names_the_row_and_writes_nothing(tmp_path, capsys):
    d = run_dir(tmp_path)
    src = tmp_path / "a.csv"
    src.write_text(HEAD + "".join(f"gpj\u202eann,d/c0/0,reference,{t},none\n" for t in (1, 2, 3)))
    assert main(["annotate-import", str(src), str(d)]) == 2
    err = capsys.readouterr().err
    assert "U+202E" in err and "row 2" in err
    assert not (d / "judgments" / "human").exists()


def _filled_export(tmp_path):
    d = run_dir(tmp_path)
    export_items(Run.open(d), tmp_path / "exp", seed=1)
    rows = list(csv.DictReader((tmp_path / "exp" / "template.csv").open()))
    for r in rows:
        r["annotator"] = "ann1"
        if r["turn"]:
            r["behaviours"] = "none"
        else:
            r["consistency"], r["collaborativeness"] = "7", "5"
    with (tmp_path / "done.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return d, tmp_path / "done.csv", tmp_path / "exp" / "key.json"


@pytest.mark.parametrize("field", ["instance_id", "target"])
def test_a_key_entry_missing_a_field_is_an_input_error_naming_file_and_item(tmp_path, capsys, field):
    d, done, key = _filled_export(tmp_path)
    keymap = json.loads(key.read_text())
    item = sorted(keymap)[0]
    del keymap[item][field]
    key.write_text(json.dumps(keymap))
    with pytest.raises(InputError) as e:
        import_into_run(done, d, key=key)
    assert str(key) in str(e.value) and f"record item {item!r}" in str(e.value) and field in str(e.value)
    assert main(["annotate-import", str(done), str(d), "--key", str(key)]) == 2  # not 1: no internal error
    assert field in capsys.readouterr().err
    assert not (d / "judgments" / "human").exists()


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"x": "reference"},
        {"x": {"instance_id": 3, "target": "reference"}},
        {"x": {"instance_id": "i", "target": "reference", "tasks": "overall"}},
    ],
)
def test_a_key_file_of_another_shape_is_an_input_error(tmp_path, bad):
    write_json(tmp_path / "key.json", bad)
    with pytest.raises(InputError, match=r"key\.json"):
        read_key(tmp_path / "key.json")


def test_an_intact_key_still_imports(tmp_path):
    d, done, key = _filled_export(tmp_path)
    rep = import_into_run(done, d, key=key)
    assert rep.annotators["ann1"].added > 0
    entries = read_key(key)  # typed entries, as written
    written = json.loads(key.read_text())
    assert {i: (e.instance_id, e.target, e.target_id, list(e.tasks)) for i, e in entries.items()} == {
        i: (k["instance_id"], k["target"], k["target_id"], k["tasks"]) for i, k in written.items()
    }
