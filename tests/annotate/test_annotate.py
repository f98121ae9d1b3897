"""Human annotations: blind export, import as judgments, clear errors."""

from __future__ import annotations

import csv
import dataclasses
import json

import polars as pl
import pytest
import yaml

from cocoeval import InputError
from cocoeval.analysis import agreement
from cocoeval.analysis.frames import run_frames
from cocoeval.annotate.exchange import (
    export_annotations,
    export_items,
    format_report,
    import_annotations,
    import_into_run,
    parse_annotations,
)
from cocoeval.cli import main
from cocoeval.core.errors import ConfigError
from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Continuation, Judgment
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.parse import map_behaviour
from cocoeval.run import Run, load_params

from ..sim_helpers import instance


def _run():
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    conts = {
        "simA": [
            Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts
        ]
    }
    return Run.model_validate({"instances": insts, "continuations": conts})


def test_blind_export_then_import(tmp_path):
    run = _run()
    rep = export_items(run, tmp_path, seed=1)
    assert rep.items == 4 and rep.rows == 4 * 3 + 4
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
            r["behaviours"] = "Repetition; Off topic"
        elif r["turn"]:
            r["behaviours"] = "none"  # said explicitly: an empty cell is not annotated
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
    (tmp_path / "a.csv").write_text("annotator,instance_id,target,turn,behaviours\nann,d/c0/0,reference,1,none\n")
    [j] = import_annotations(tmp_path / "a.csv", run)
    assert j.status == "invalid" and j.reason == "turns not annotated: 2, 3"


@pytest.mark.parametrize(
    "row,needle",
    [
        ("ann,d/c0/0,reference,1,Sarcasm", "unknown behaviour 'Sarcasm'"),
        ("ann,d/c0/0,reference,1,On topic", "unknown behaviour 'On topic'"),
        ("ann,d/c0/0,reference,1,Not repetition", "unknown behaviour 'Not repetition'"),
        ("ann,d/c0/0,reference,1,Redundant info", "unknown behaviour 'Redundant info'"),
        ("ann,d/c0/0,reference,9,none", "turn must be 1-3"),
        ("ann,d/c0/0,nobody,1,none", "no target 'nobody'"),
        (",d/c0/0,reference,1,none", "no annotator"),
        ("ann,d/c0/0,reference,1,None; Repetition", "'None' together with behaviours"),
        ("ann,d/c0/0,reference,1,; ;", "behaviours '; ;' names no behaviour"),
    ],
)
def test_bad_rows_name_file_and_row(tmp_path, row, needle):
    run = _run()
    (tmp_path / "bad.csv").write_text("annotator,instance_id,target,turn,behaviours\n" + row + "\n")
    with pytest.raises(InputError) as e:
        import_annotations(tmp_path / "bad.csv", run)
    assert needle in str(e.value) and "bad.csv" in str(e.value) and "row 2" in str(e.value)


def test_bad_likert_and_header(tmp_path):
    run = _run()
    (tmp_path / "l.csv").write_text(
        "annotator,instance_id,target,turn,behaviours,consistency,collaborativeness\nann,d/c0/0,reference,,,11,5\n"
    )
    with pytest.raises(InputError, match="consistency must be an integer from 1 to 10"):
        import_annotations(tmp_path / "l.csv", run)
    (tmp_path / "h.csv").write_text("who,what\nx,y\n")
    with pytest.raises(InputError, match="CSV header lacks"):
        import_annotations(tmp_path / "h.csv", run)


# ---------------------------------------------------------------- rows: rejected and repaired


def _note(name):
    """judge_parse's repair note for a behaviour name (its wording is judge_parse's)."""
    return map_behaviour(name, load_taxonomy())[1]


HEAD = "annotator,instance_id,target,turn,behaviours,consistency,collaborativeness\n"


def test_every_rejected_row_is_listed_and_nothing_imported(tmp_path):
    run = _run()
    (tmp_path / "bad.csv").write_text(
        HEAD + "ann,d/c0/0,reference,1,Sarcasm\n"
        "ann,d/c0/0,reference,2,none\n"
        "ann,d/c0/0,reference,3,Repetition,7\n"
        "ann,d/c0/0,reference,,Repetition,7,7\n"
        "ann,d/c1/0,reference,1,none;Repetition\n"
        "ann,d/c1/0,reference,2,,,,x\n"
        "ann,d/c1/0,reference,,,7,\n"
    )
    with pytest.raises(InputError) as e:
        import_annotations(tmp_path / "bad.csv", run)
    msg = str(e.value)
    assert "6 rows rejected; nothing was imported" in msg and "bad.csv" in msg
    for needle in (
        "row 2: unknown behaviour 'Sarcasm'",
        "row 4: consistency on a turn row",
        "row 5: behaviours on a row without a turn",
        "row 6: 'none' together with behaviours",
        "row 7: the row has more cells than the header",
        "row 8: collaborativeness is empty but the other score is given",
    ):
        assert needle in msg
    assert "row 3" not in msg
    rejected = e.value.rejected
    assert [(r["row"], r["value"]) for r in rejected][:2] == [("row 2", "Sarcasm"), ("row 4", "7")]
    assert all(r["file"] == str(tmp_path / "bad.csv") and r["action"].startswith("rejected: ") for r in rejected)


def test_repaired_values_are_reported_with_file_row_and_value(tmp_path):
    run = _run()
    (tmp_path / "r.csv").write_text(
        HEAD + "ann,d/c0/0,reference,1,repetitions;Repetition\n"
        "ann,d/c0/0,reference,2,OFF_TOPIC\n"
        "ann,d/c0/0,reference,3,n/a\n"
        "ann,d/c0/0,reference,,,7,5\n"
    )
    parsed = parse_annotations(tmp_path / "r.csv", run)
    notes = [(n["row"], n["value"], n["action"]) for n in parsed.notes]
    # the note is judge_parse's (a plural is always a repair; a case variant may be)
    expected = [
        ("row 2", "repetitions;Repetition", f"repaired: {_note('repetitions')}"),
        ("row 2", "repetitions;Repetition", "repaired: 'Repetition' lists repetition twice; kept once"),
    ]
    expected += [("row 3", "OFF_TOPIC", f"repaired: {_note('OFF_TOPIC')}")]
    expected += [("row 4", "n/a", "repaired: 'n/a' read as no behaviour (none)")]
    assert _note("repetitions") and _note("OFF_TOPIC") and notes == expected
    assert {n["file"] for n in parsed.notes} == {str(tmp_path / "r.csv")}
    [fine, over] = import_annotations(tmp_path / "r.csv", run)
    assert [lb.behaviours for lb in fine.labels] == [["repetition"], ["off_topic"], []]
    assert fine.status == "repaired" and fine.repairs[0] == f"turn 1: {_note('repetitions')}"
    assert len(fine.repairs) == len(expected)
    assert over.status == "ok" and (over.consistency, over.collaborativeness) == (7, 5)


def test_jsonl_rows_follow_the_same_rules(tmp_path):
    run = _run()
    good = [
        {
            "annotator": "ann",
            "instance_id": "d/c0/0",
            "target": "reference",
            "turn": 1,
            "behaviours": ["Repetition", "off_topic"],
        },
        {"annotator": "ann", "instance_id": "d/c0/0", "target": "reference", "turn": 2, "behaviours": []},
        {
            "annotator": "ann",
            "instance_id": "d/c0/0",
            "target": "reference",
            "consistency": 7.0,
            "collaborativeness": 5,
        },
    ]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in good))
    [fine, over] = import_annotations(tmp_path / "g.jsonl", run)
    assert fine.labels[0].behaviours == ["repetition", "off_topic"] and over.consistency == 7
    assert over.status == "repaired" and over.repairs == ["consistency 7.0 read as 7"]

    bad = [
        '["ann", "d/c0/0"]',
        json.dumps({**good[1], "behaviours": ["none", "Repetition"]}),
        json.dumps({**good[1], "turn": 3} | {"behaviours": ["Repetition", 3]}),
        json.dumps({**good[2], "consistency": True}),
        json.dumps({**good[1], "behaviours": ["", " "]}),
        json.dumps({**good[1], "turn": 3, "annotator": "../x"}),
    ]
    (tmp_path / "b.jsonl").write_text("\n".join(bad) + "\n")
    with pytest.raises(InputError) as e:
        import_annotations(tmp_path / "b.jsonl", run)
    msg = str(e.value)
    assert "b.jsonl" in msg and "6 rows rejected" in msg
    for needle in (
        "line 1: expected an object",
        "line 2: 'none' together with behaviours",
        "line 3: behaviours must be text or a number",
        "line 4: consistency must be text or a number",
        "line 5: behaviours '; ' names no behaviour",
        "line 6: annotator '../x' cannot name a file",
    ):
        assert needle in msg


def test_conflicting_rows_are_refused_and_agreeing_ones_kept_once(tmp_path):
    run = _run()
    rows = HEAD + "ann,d/c0/0,reference,1,Repetition\nann,d/c0/0,reference,1,repetition\nann,d/c0/0,reference,,,7,5\n"
    (tmp_path / "dup.csv").write_text(rows)
    parsed = parse_annotations(tmp_path / "dup.csv", run)
    assert ("row 3", "duplicate of row 2 (same value); kept once") in [(n["row"], n["action"]) for n in parsed.notes]
    assert len(parsed.cells) == 2
    (tmp_path / "c.csv").write_text(rows + "ann,d/c0/0,reference,1,Off topic\nann,d/c0/0,reference,,,8,5\n")
    with pytest.raises(InputError) as e:
        parse_annotations(tmp_path / "c.csv", run)
    msg = str(e.value)
    assert "conflict for ann, d/c0/0 reference turn 1: row 2 gives 'Repetition', row 5 gives 'Off topic'" in msg
    assert "conflict for ann, d/c0/0 reference overall: row 4 gives '7, 5', row 6 gives '8, 5'" in msg


# ---------------------------------------------------------------- stores in the run directory


def _run_dir(tmp_path, judges=()):
    run = _run()
    d = tmp_path / "run"
    write_jsonl(d / "instances.jsonl", run.instances)
    write_jsonl(d / "continuations" / "simA.jsonl", run.continuations["simA"])
    tax = load_taxonomy()
    write_json(
        d / "manifest.json", {"taxonomy": {"name": tax.name, "hash": tax.hash}, "judges": {j: {} for j in judges}}
    )
    return d


def _rows_file(path, annotator, labels, scores=None, target="reference"):
    """labels: {instance: {turn: behaviours}}; scores: {instance: (c, k)}."""
    lines = [f"{annotator},{i},{target},{t},{b}" for i, ts in labels.items() for t, b in ts.items()]
    lines += [f"{annotator},{i},{target},,,{c},{k}" for i, (c, k) in (scores or {}).items()]
    path.write_text(HEAD + "\n".join(lines) + "\n")
    return path


ALL = {"d/c0/0": {1: "Repetition", 2: "none", 3: "none"}}


def test_each_annotator_has_a_store_and_a_second_import_adds(tmp_path):
    d = _run_dir(tmp_path)
    rep = import_into_run(_rows_file(tmp_path / "a1.csv", "ann1", ALL, {"d/c0/0": (7, 5)}), d)
    assert dataclasses.asdict(rep.annotators["ann1"]) | {"store": None} == {
        "added": 4,
        "unchanged": 0,
        "replaced": 0,
        "store": None,
        "judgments": 2,
        "invalid": 0,
        "invalid_reasons": [],
        "written": True,
    }
    import_into_run(_rows_file(tmp_path / "a2.csv", "ann2", {"d/c0/0": {1: "none", 2: "none", 3: "Off topic"}}), d)
    assert sorted(p.name for p in (d / "judgments" / "human").iterdir()) == ["ann1.jsonl", "ann2.jsonl"]
    js = Run.open(d).all_judgments
    assert sorted(js) == ["human:ann1", "human:ann2"]
    assert [lb.behaviours for lb in js["human:ann1"][0].labels] == [["repetition"], [], []]
    assert js["human:ann2"][0].labels[2].behaviours == ["off_topic"]
    run = Run.open(d)  # LLM judges by judge, human annotations by annotator
    assert run.judgments == {} and sorted(run.human) == ["ann1", "ann2"] and run.human["ann1"] == js["human:ann1"]
    assert not hasattr(Run.open(d), "__getitem__")  # the deprecated run["judgments"] is gone: all_judgments
    # ann1 labels a second item: added beside the first
    rep = import_into_run(_rows_file(tmp_path / "a3.csv", "ann1", {"d/c1/0": {1: "none", 2: "none"}}), d)
    assert rep.annotators["ann1"].added == 2
    ann1 = Run.open(d).all_judgments["human:ann1"]
    assert [(j.instance_id, j.kind, j.status) for j in ann1] == [
        ("d/c0/0", "fine_grained", "ok"),
        ("d/c1/0", "fine_grained", "invalid"),
        ("d/c0/0", "overall", "ok"),
    ]
    assert ann1[1].reason == "turns not annotated: 3"
    f = run_frames(Run.open(d))
    assert set(f.judgments["judge"]) == {"ann1", "ann2"} and f.judgments["human"].all()


def test_importing_the_same_file_twice_changes_nothing(tmp_path):
    d = _run_dir(tmp_path)
    src = _rows_file(tmp_path / "a.csv", "ann1", ALL, {"d/c0/0": (7, 5)})
    import_into_run(src, d)
    store = d / "judgments" / "human" / "ann1.jsonl"
    before = store.read_bytes()
    rep = import_into_run(src, d)
    assert store.read_bytes() == before
    assert rep.annotators["ann1"].added == 0 and rep.annotators["ann1"].unchanged == 4
    assert not rep.annotators["ann1"].written
    assert "nothing new (already imported)" in format_report(rep)
    # the same labels in another order and spelling change nothing either
    _rows_file(tmp_path / "b.csv", "ann1", {"d/c0/0": {3: "none", 1: "repetition", 2: "none"}}, {"d/c0/0": (7, 5)})
    import_into_run(tmp_path / "b.csv", d)
    assert store.read_bytes() == before


def test_changed_labels_are_a_conflict_unless_replace(tmp_path):
    d = _run_dir(tmp_path)
    import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL, {"d/c0/0": (7, 5)}), d)
    store = d / "judgments" / "human" / "ann1.jsonl"
    before = store.read_bytes()
    changed = _rows_file(
        tmp_path / "b.csv", "ann1", {"d/c0/0": {1: "Off topic", 2: "none", 3: "none"}}, {"d/c0/0": (3, 5)}
    )
    with pytest.raises(InputError) as e:
        import_into_run(changed, d)
    msg = str(e.value)
    assert "2 rows change labels already imported; nothing was imported" in msg and "b.csv" in msg
    assert "row 2: ann1, d/c0/0 reference turn 1: stored 'repetition', the file gives 'Off topic'" in msg
    assert "row 5: ann1, d/c0/0 reference overall: stored '7, 5', the file gives '3, 5'" in msg
    assert "--replace" in msg and store.read_bytes() == before
    rep = import_into_run(changed, d, replace=True)
    assert dataclasses.asdict(rep.annotators["ann1"]) | {"store": None} == {
        "added": 0,
        "unchanged": 2,
        "replaced": 2,
        "store": None,
        "judgments": 2,
        "invalid": 0,
        "invalid_reasons": [],
        "written": True,
    }
    assert [(n["row"], n["action"]) for n in rep.notes] == [
        ("row 2", "replaced the stored 'repetition'"),
        ("row 5", "replaced the stored '7, 5'"),
    ]
    [fine, over] = Run.open(d).all_judgments["human:ann1"]
    assert fine.labels[0].behaviours == ["off_topic"] and over.consistency == 3


def test_replace_drops_the_repair_note_of_the_replaced_turn(tmp_path):
    d = _run_dir(tmp_path)
    import_into_run(_rows_file(tmp_path / "a.csv", "ann1", {"d/c0/0": {1: "repetitions", 2: "none", 3: "none"}}), d)
    [j] = Run.open(d).all_judgments["human:ann1"]
    assert j.status == "repaired" and j.repairs == [f"turn 1: {_note('repetitions')}"]
    import_into_run(_rows_file(tmp_path / "b.csv", "ann1", {"d/c0/0": {1: "Off topic"}}), d, replace=True)
    [j] = Run.open(d).all_judgments["human:ann1"]
    assert j.status == "ok" and j.repairs == [] and j.labels[0].behaviours == ["off_topic"]


@pytest.mark.parametrize("text", ["annotator,instance_id,target,turn,behaviours\n", "", "\n\n"])
def test_header_only_or_empty_file_is_an_error_and_writes_nothing(tmp_path, text):
    d = _run_dir(tmp_path)
    (tmp_path / "h.csv").write_text(text)
    with pytest.raises(InputError, match=r"h\.csv") as e:
        import_into_run(tmp_path / "h.csv", d)
    assert "only a header" in str(e.value) or "file is empty" in str(e.value)
    assert not (d / "judgments").exists()


def test_dry_run_writes_nothing(tmp_path):
    d = _run_dir(tmp_path)
    rep = import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL), d, dry_run=True)
    assert rep.annotators["ann1"].added == 3 and not rep.annotators["ann1"].written
    assert not (d / "judgments").exists()


# ---------------------------------------------------------------- names of judges and annotators


def test_annotator_names_may_not_clash_with_judges_or_each_other(tmp_path):
    d = _run_dir(tmp_path, judges=["o4-mini"])
    write_jsonl(
        d / "judgments" / "judge1.jsonl",
        [
            Judgment(
                instance_id="d/c0/0",
                target="reference",
                judge_id="j1",
                judge_name="judge1",
                kind="overall",
                taxonomy_hash=load_taxonomy().hash,
                consistency=5,
                collaborativeness=5,
            )
        ],
    )
    for name, needle in [
        ("judge1", "has the name of the LLM judge 'judge1'"),
        ("O4-Mini", "has the name of the LLM judge 'o4-mini'"),
        ("Human", "'human' is reserved"),
    ]:
        with pytest.raises(InputError, match=needle):
            import_into_run(_rows_file(tmp_path / "x.csv", name, ALL), d)
    assert not (d / "judgments" / "human").exists()
    import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL), d)
    with pytest.raises(InputError, match="'Ann1' differs only by case from the existing annotator 'ann1'"):
        import_into_run(_rows_file(tmp_path / "b.csv", "Ann1", ALL), d)


def test_judges_may_not_take_an_annotators_name(tmp_path):
    d = _run_dir(tmp_path)
    import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL), d)
    params = {"name": "x", "out": str(d), "bench": "nowhere", "judges": [{"name": "ANN1", "model": "openai/m"}]}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match="judge 'ANN1' has the name of annotator 'ann1'"):
        load_params(tmp_path / "p.yaml").run()
    assert not (d / "usage.json").exists()
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**params, "judges": [{"name": "human", "model": "openai/m"}]}))
    with pytest.raises(InputError, match="'human' is reserved for human annotations"):
        load_params(tmp_path / "p.yaml")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**params, "judges": [{"name": "human/ann1", "model": "m"}]}))
    with pytest.raises(InputError, match="cannot be a file name"):
        load_params(tmp_path / "p.yaml")


def test_a_store_holds_only_its_annotator(tmp_path):
    d = _run_dir(tmp_path)
    import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL), d)
    (d / "judgments" / "human" / "ann1.jsonl").rename(d / "judgments" / "human" / "ann2.jsonl")
    with pytest.raises(InputError, match="judgment of 'human:ann1' in the store of annotator 'ann2'"):
        Run.open(d)


def test_old_single_human_file_is_not_merged_silently(tmp_path):
    d = _run_dir(tmp_path)
    write_jsonl(
        d / "judgments" / "human.jsonl", import_annotations(_rows_file(tmp_path / "a.csv", "ann1", ALL), _run())
    )
    with pytest.raises(InputError, match="older cocoeval") as e:
        import_into_run(tmp_path / "a.csv", d)
    assert "move that file out of the run" in str(e.value)


def test_run_taxonomy_must_match(tmp_path):
    d = _run_dir(tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    write_json(d / "manifest.json", {**m, "taxonomy": {"name": "other", "hash": "abc"}})
    with pytest.raises(ConfigError, match="the run uses taxonomy 'other'"):
        import_into_run(_rows_file(tmp_path / "a.csv", "ann1", ALL), d)


def test_cli_prints_the_report(tmp_path, capsys):
    d = _run_dir(tmp_path)
    src = _rows_file(tmp_path / "a.csv", "ann1", {"d/c0/0": {1: "repetitions", 2: "none", 3: "none"}})
    assert main(["annotate-import", str(src), str(d), "--report", str(tmp_path / "rep.json")]) == 0
    out = capsys.readouterr().out
    assert "annotator ann1: 3 added, 0 replaced, 0 unchanged" in out
    assert f"row 2: 'repetitions': repaired: {_note('repetitions')}" in out
    assert json.loads((tmp_path / "rep.json").read_text())["notes"][0]["row"] == "row 2"
    _rows_file(tmp_path / "b.csv", "ann1", {"d/c0/0": {1: "Sarcasm"}})
    assert main(["annotate-import", str(tmp_path / "b.csv"), str(d)]) == 2
    assert "unknown behaviour 'Sarcasm'" in capsys.readouterr().err


# --- the paper's draw (Appendix B.1), the judge's instructions, the B.3 coverage field -------
def _multi_run(per_dataset, missing_s2=()):
    """Instances in datasets {name: count}; setups s1 (everywhere) and s2 (not on missing_s2)."""
    insts = []
    for ds, k in per_dataset.items():
        insts += [instance(f"{ds}/c{i}/0", n_hist=2, n_ref=2).model_copy(update={"dataset": ds}) for i in range(k)]
    conts = {
        "s1": [Continuation(instance_id=i.id, setup_id="id1", setup_name="s1", turns=i.reference) for i in insts],
        "s2": [
            Continuation(instance_id=i.id, setup_id="id2", setup_name="s2", turns=i.reference)
            for i in insts
            if i.id not in missing_s2
        ],
    }
    return Run.model_validate({"instances": insts, "continuations": conts})


def _key_counts(folder, task):
    key = json.loads((folder / "key.json").read_text())
    per: dict[str, set] = {}
    for v in key.values():
        if task in v["tasks"]:
            per.setdefault(v["instance_id"].split("/")[0], set()).add(v["instance_id"])
    targets = sorted({v["target"] for v in key.values() if task in v["tasks"]})
    return {d: len(s) for d, s in per.items()}, targets, sum(task in v["tasks"] for v in key.values())


def test_the_papers_draw_is_even_over_six_datasets(tmp_path):
    run = _multi_run({f"ds{k}": 5 for k in range(6)})
    rep = export_items(run, tmp_path / "a", seed=3, overall_setups=["s1", "s2"], fine_setups=["s1"])
    per, targets, n = _key_counts(tmp_path / "a", "overall")
    # 54 conversations = 18 instances x 3 targets, 3 instances from each of the six datasets
    assert per == {f"ds{k}": 3 for k in range(6)} and targets == ["reference", "s1", "s2"] and n == 54
    per, targets, n = _key_counts(tmp_path / "a", "fine_grained")
    assert per == {f"ds{k}": 3 for k in range(6)} and targets == ["reference", "s1"] and n == 36
    assert rep.sample["overall"]["notes"] == [] and rep.sample["fine_grained"]["notes"] == []
    rows = list(csv.DictReader((tmp_path / "a" / "template.csv").open()))
    assert sum(1 for r in rows if not r["turn"]) == 54 and sum(1 for r in rows if r["turn"]) == 36 * 2
    assert "not_in_taxonomy" in rows[0]
    items = [json.loads(x) for x in (tmp_path / "a" / "items.jsonl").read_text().splitlines()]
    assert all(set(i["tasks"]) <= {"overall", "fine_grained"} for i in items)
    assert all(not t["annotate"] for i in items if "fine_grained" not in i["tasks"] for t in i["turns"])
    text = (tmp_path / "a" / "items.jsonl").read_text()
    assert not any(w in text for w in ('"s1"', '"s2"', "id1", "id2", "reference"))  # blind
    exp = json.loads((tmp_path / "a" / "export.json").read_text())
    assert exp["sample"]["overall"]["per_dataset"] == {f"ds{k}": 3 for k in range(6)}
    # the same seed draws the same; another seed another
    export_items(run, tmp_path / "b", seed=3, overall_setups=["s1", "s2"], fine_setups=["s1"])
    assert (tmp_path / "a" / "key.json").read_text() == (tmp_path / "b" / "key.json").read_text()
    export_items(run, tmp_path / "c", seed=4, overall_setups=["s1", "s2"], fine_setups=["s1"])
    assert (tmp_path / "a" / "key.json").read_text() != (tmp_path / "c" / "key.json").read_text()


def test_an_uneven_draw_is_said(tmp_path):
    # 4 datasets; e has only 1 instance with s2; 30 conversations over 3 targets = 10 instances
    run = _multi_run({"a": 6, "b": 6, "c": 6, "e": 4}, missing_s2={"e/c0/0", "e/c1/0", "e/c2/0"})
    rep = export_items(run, tmp_path, seed=0, setups=["s1", "s2"], overall_conversations=31, fine_conversations=0)
    s = rep.sample["overall"]
    per, _, n = _key_counts(tmp_path, "overall")
    assert sum(per.values()) == 10 and n == 30 and per["e"] == 1 and "fine_grained" not in rep.sample
    assert max(per.values()) - min(per[d] for d in "abc") <= 1
    notes = "\n".join(s["notes"])
    assert "31 conversations is not a multiple of the 3 targets" in notes
    assert "the paper drew evenly over 6 datasets; this run has 4" in notes
    assert "10 instances do not divide evenly over 4 datasets" in notes
    assert "e has only 1 instance(s) with every target" in notes and "taken instead from" in notes
    # more than the run has: all of them, said so
    rep = export_items(run, tmp_path / "all", setups=["s1"], overall_conversations=100, fine_conversations=0)
    assert len(rep.sample["overall"]["instances"]) == 22
    assert "the run has 22 instances with every target, not 50" in "\n".join(rep.sample["overall"]["notes"])


def test_export_carries_the_judges_instructions_and_bad_options_are_clear(tmp_path, capsys):
    from string import Template

    from cocoeval.prompts.files import load_prompt
    from cocoeval.prompts.render import behaviours_block

    run = _multi_run({"a": 2, "b": 2})
    export_items(run, tmp_path)
    text = (tmp_path / "instructions.md").read_text()
    tax = load_taxonomy()
    for name in ("judge_overall", "judge_fine_grained"):
        p = load_prompt(name)
        assert p.ref in text
        system = Template(p.system).safe_substitute(n_turns="N", only_some="", behaviours=behaviours_block(tax))
        for line in filter(None, system.strip().splitlines()):
            assert f"> {line}" in text, line  # the judge's own text, from its prompt file
    assert "not_in_taxonomy" in text
    with pytest.raises(ConfigError, match="unknown setup 'nope'"):
        export_items(run, tmp_path / "x", setups=["nope"])
    with pytest.raises(ConfigError, match="nothing to export"):
        export_items(run, tmp_path / "x", overall_conversations=0, fine_conversations=0)


def test_cli_export_prints_the_draw(tmp_path, capsys):
    run = _multi_run({"a": 3, "b": 3})
    d = tmp_path / "run"
    write_jsonl(d / "instances.jsonl", run.instances)
    for name, cs in run.continuations.items():
        write_jsonl(d / "continuations" / f"{name}.jsonl", cs)
    write_json(d / "manifest.json", {"status": "complete"})
    assert (
        main(
            [
                "annotate-export",
                str(d),
                "--out",
                str(tmp_path / "o"),
                "--fine-setup",
                "s1",
                "--overall-conversations",
                "6",
                "--fine-conversations",
                "4",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "overall: 6 conversations (2 instances x 3 targets: reference, s1, s2); instances per dataset: a 1, b 1" in out
    )
    assert "fine_grained: 4 conversations (2 instances x 2 targets: reference, s1)" in out
    assert "note: the paper drew evenly over 6 datasets; this run has 2" in out
    assert main(["annotate-export", str(d), "--out", str(tmp_path / "p"), "--setup", "nope"]) == 2
    assert "unknown setup 'nope'" in capsys.readouterr().err


def test_behaviour_not_in_taxonomy_is_kept_and_its_rate_reported(tmp_path):

    d = _run_dir(tmp_path)
    head = "annotator,instance_id,target,turn,behaviours,not_in_taxonomy\n"
    (tmp_path / "a.csv").write_text(
        head + "ann1,d/c0/0,reference,1,Repetition,talks over the chair\n"
        "ann1,d/c0/0,reference,2,none,\nann1,d/c0/0,reference,3,none,\n"
        "ann2,d/c0/0,reference,1,none,\nann2,d/c0/0,reference,2,none,\n"
        "ann2,d/c0/0,reference,3,none,\n"
    )
    import_into_run(tmp_path / "a.csv", d)
    js = Run.open(d).all_judgments
    assert [lb.not_in_taxonomy for lb in js["human:ann1"][0].labels] == ["talks over the chair", None, None]
    cov = agreement.taxonomy_coverage(run_frames(Run.open(d)))
    assert cov.select("annotator", "turns", "turns_not_in_taxonomy", "rate").rows() == [
        ("ann1", 3, 1, pytest.approx(1 / 3)),
        ("ann2", 3, 0, 0.0),
    ]
    # only judgments that count are covered: a stale or skipped one is not (nor an invalid one)
    f = run_frames(Run.open(d))
    for status in ("stale", "skipped", "invalid"):
        g = dataclasses.replace(
            f,
            judgments=f.judgments.with_columns(
                status=pl.when(pl.col("judge") == "ann2").then(pl.lit(status)).otherwise(pl.col("status"))
            ),
        )
        assert agreement.taxonomy_coverage(g)["annotator"].to_list() == ["ann1"]
    # importing again changes nothing; another description is a conflict (like changed behaviours)
    rep = import_into_run(tmp_path / "a.csv", d)
    assert rep.annotators["ann1"].unchanged == 3
    (tmp_path / "b.csv").write_text(head + "ann1,d/c0/0,reference,1,Repetition,shouts\n")
    with pytest.raises(InputError, match="not in taxonomy: shouts"):
        import_into_run(tmp_path / "b.csv", d)
    # round trip through the non-blind format keeps it
    export_annotations(js["human:ann1"], tmp_path / "again.csv")
    assert "talks over the chair" in (tmp_path / "again.csv").read_text()
    # only on turn rows
    (tmp_path / "c.csv").write_text(
        "annotator,instance_id,target,turn,behaviours,not_in_taxonomy,consistency,"
        "collaborativeness\nann3,d/c0/0,reference,,,odd,5,5\n"
    )
    with pytest.raises(InputError, match="not_in_taxonomy on a row without a turn"):
        import_into_run(tmp_path / "c.csv", d)


# --- "no behaviour" is said explicitly; an empty cell is not annotated, never zero ------------
def test_none_is_zero_behaviours_and_an_empty_cell_is_not_annotated(tmp_path):
    from cocoeval.analysis.frames import invalid_rates

    d = _run_dir(tmp_path)
    # ann1 says none on every turn: a valid judgment with zero behaviours (counted as zeros)
    # ann2 leaves turn 3 empty: reported, and the target is invalid (never zeros)
    src = _rows_file(tmp_path / "a.csv", "ann1", {"d/c0/0": {1: "none", 2: "NONE", 3: "none"}})
    src.write_text(
        src.read_text() + "ann2,d/c0/0,reference,1,Repetition\nann2,d/c0/0,reference,2,none\nann2,d/c0/0,reference,3,\n"
    )
    rep = import_into_run(src, d)
    assert rep.not_annotated == 1
    assert [(n["row"], n["value"], n["action"]) for n in rep.notes] == [
        (
            "row 7",
            "",
            "not annotated, skipped: item d/c0/0 reference turn 3: behaviours empty "
            "(write none for a turn without behaviour)",
        )
    ]
    assert "1 not annotated (left empty; skipped" in format_report(rep)
    assert "row 7: '': not annotated, skipped" in format_report(rep)
    js = Run.open(d).all_judgments
    [one], [two] = js["human:ann1"], js["human:ann2"]
    assert one.status == "ok" and [lb.behaviours for lb in one.labels] == [[], [], []] and one.repairs == []
    assert two.status == "invalid" and two.reason == "turns not annotated: 3"
    assert [lb.turn for lb in two.labels] == [0, 1]  # the labelled turns are kept, turn 3 is no label
    f = run_frames(Run.open(d))
    counts = f.counts.filter(pl.col("target") == "reference")
    assert set(counts["judge"]) == {"ann1"} and counts["count"].sum() == 0  # ann1's zeros, nothing of ann2
    rates = invalid_rates(f).filter(pl.col("stage") == "judge").select("judge", "n", "invalid").rows()
    assert sorted(rates) == [("ann1", 1, 0), ("ann2", 1, 1)]
    # labelling turn 3 later completes the target
    _rows_file(tmp_path / "b.csv", "ann2", {"d/c0/0": {3: "none"}})
    import_into_run(tmp_path / "b.csv", d)
    [two] = Run.open(d).all_judgments["human:ann2"]
    assert two.status == "ok" and [lb.behaviours for lb in two.labels] == [["repetition"], [], []]


def test_jsonl_missing_null_or_empty_behaviours_are_not_annotated(tmp_path):
    run = _run()
    base = {"annotator": "ann", "instance_id": "d/c0/0", "target": "reference"}
    rows = [
        {**base, "turn": 1, "behaviours": []},
        {**base, "turn": 2, "behaviours": None},
        {**base, "turn": 3},
        {**base, "turn": 3, "behaviours": "  "},
        {**base, "consistency": None, "collaborativeness": ""},
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    parsed = parse_annotations(tmp_path / "a.jsonl", run)
    assert parsed.not_annotated == 4 and len(parsed.cells) == 1
    assert [n["row"] for n in parsed.notes] == ["line 2", "line 3", "line 4", "line 5"]
    assert parsed.notes[-1]["action"] == (
        "not annotated, skipped: item d/c0/0 reference overall: consistency and collaborativeness empty"
    )
    [fine] = import_annotations(tmp_path / "a.jsonl", run)  # no overall judgment: its scores were left empty
    assert fine.labels[0].behaviours == [] and fine.status == "invalid" and fine.reason == "turns not annotated: 2, 3"


def test_an_untouched_template_imports_nothing_and_a_partly_filled_one_says_what_it_skipped(tmp_path):
    run = _run()
    export_items(run, tmp_path, seed=1)
    rows = list(csv.DictReader((tmp_path / "template.csv").open()))
    # the template says what to write, on every row
    assert all("or none (an empty cell is not annotated)" in r["note"] for r in rows if r["turn"])
    assert all("1-10" in r["note"] for r in rows if not r["turn"])
    assert "write `none` explicitly" in (tmp_path / "instructions.md").read_text()
    with pytest.raises(InputError, match="none of the 16 rows is annotated") as e:
        import_annotations(tmp_path / "template.csv", run, key=tmp_path / "key.json")
    assert "template.csv" in str(e.value) and "none for a turn without behaviour" in str(e.value)
    # one item filled (the annotator names only the rows they filled); the rest is skipped and said
    first = rows[0]["item_id"]
    for r in rows:
        if r["item_id"] == first:
            r["annotator"] = "ann1"
            r["behaviours"] = "none" if r["turn"] else ""
            r["consistency"] = r["collaborativeness"] = "" if r["turn"] else "6"
    with (tmp_path / "done.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    parsed = parse_annotations(tmp_path / "done.csv", run, key=tmp_path / "key.json")
    assert parsed.not_annotated == 12 and len(parsed.cells) == 4
    assert all(n["action"].startswith("not annotated, skipped: item ") for n in parsed.notes)
    js = import_annotations(tmp_path / "done.csv", run, key=tmp_path / "key.json")
    assert sorted((j.kind, j.status) for j in js) == [("fine_grained", "ok"), ("overall", "ok")]  # none for the rest


def test_export_annotations_writes_none_explicitly(tmp_path):
    run = _run()
    _rows_file(tmp_path / "a.csv", "ann", {"d/c0/0": {1: "Repetition", 2: "none", 3: "none"}}, {"d/c0/0": (7, 5)})
    js = import_annotations(tmp_path / "a.csv", run)
    for name in ("again.csv", "again.jsonl"):
        export_annotations(js, tmp_path / name)
        assert import_annotations(tmp_path / name, run) == js
    assert "d/c0/0,reference,2,none," in (tmp_path / "again.csv").read_text()
    assert '"behaviours": []' in (tmp_path / "again.jsonl").read_text()


def test_not_in_taxonomy_with_empty_behaviours_is_rejected(tmp_path):
    run = _run()
    (tmp_path / "a.csv").write_text(
        "annotator,instance_id,target,turn,behaviours,not_in_taxonomy\nann,d/c0/0,reference,1,,talks over the chair\n"
    )
    with pytest.raises(InputError, match="not_in_taxonomy is given but behaviours is empty") as e:
        import_annotations(tmp_path / "a.csv", run)
    assert "row 2" in str(e.value) and "write none in behaviours" in str(e.value)
    (tmp_path / "b.csv").write_text(
        "annotator,instance_id,target,turn,behaviours,not_in_taxonomy\n"
        "ann,d/c0/0,reference,1,none,talks over the chair\n"
    )
    [j] = import_annotations(tmp_path / "b.csv", run)
    assert j.labels[0].behaviours == [] and j.labels[0].not_in_taxonomy == "talks over the chair"


def test_params_annotation_section_draws_the_papers_b1_sets(tmp_path, capsys):
    """annotate-export PARAMS.yaml draws what the params' annotation: section says; paper.yaml's is
    B.1's: overall 54 = human, GPT-4.1 and GPT-4.1 SFT (30 turns per call) x 18 instances, fine-grained
    36 = human and GPT-4.1 x 18, 3 instances from each of the six datasets."""
    from cocoeval.run.params import AnnotationSection

    from ..conftest import ROOT

    section = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())["annotation"]
    assert section["overall"]["setups"] == ["gpt41-vanilla-30", "gpt41-sft-30"]
    assert section["fine_grained"]["setups"] == ["gpt41-vanilla-30"]
    insts = [
        instance(f"ds{k}/c{i}/0", n_hist=2, n_ref=2).model_copy(update={"dataset": f"ds{k}"})
        for k in range(6)
        for i in range(5)
    ]
    names = ("gpt41-vanilla-30", "gpt41-sft-30", "gpt41-vanilla-1")
    d = tmp_path / "run"
    write_jsonl(d / "instances.jsonl", insts)
    for name in names:
        write_jsonl(
            d / "continuations" / f"{name}.jsonl",
            [Continuation(instance_id=i.id, setup_id=f"id-{name}", setup_name=name, turns=i.reference) for i in insts],
        )
    write_json(d / "manifest.json", {"status": "complete"})
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"name": "p", "bench": "bench", "out": "run", "annotation": section}))

    assert main(["annotate-export", str(params), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "overall: 54 conversations (18 instances x 3 targets: reference, gpt41-vanilla-30, gpt41-sft-30)" in out
    assert "fine_grained: 36 conversations (18 instances x 2 targets: reference, gpt41-vanilla-30)" in out
    per, targets, n = _key_counts(tmp_path / "a", "overall")
    assert per == {f"ds{k}": 3 for k in range(6)} and n == 54
    assert targets == ["gpt41-sft-30", "gpt41-vanilla-30", "reference"]
    per, targets, n = _key_counts(tmp_path / "a", "fine_grained")
    assert per == {f"ds{k}": 3 for k in range(6)} and n == 36 and targets == ["gpt41-vanilla-30", "reference"]
    exp = json.loads((tmp_path / "a" / "export.json").read_text())
    assert exp["sample"]["overall"]["notes"] == [] and exp["sample"]["overall"]["even_over_datasets"] is True
    # the same draw as the options would make; without the section, every setup of the run is annotated
    run = Run.open(d)
    export_items(run, tmp_path / "b", overall_setups=list(names[:2]), fine_setups=list(names[:1]))
    assert (tmp_path / "a" / "key.json").read_text() == (tmp_path / "b" / "key.json").read_text()
    assert main(["annotate-export", str(d), "--out", str(tmp_path / "c")]) == 0
    assert "4 targets: reference, gpt41-sft-30, gpt41-vanilla-1, gpt41-vanilla-30" in capsys.readouterr().out
    # options override single fields of the section
    assert (
        main(
            [
                "annotate-export",
                str(params),
                "--out",
                str(tmp_path / "o"),
                "--fine-conversations",
                "0",
                "--overall-conversations",
                "36",
                "--seed",
                "5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "overall: 36 conversations (12 instances x 3 targets" in out and "fine_grained" not in out
    # a setup the run lacks (paper.yaml's SFT setup is commented out) is an error, never skipped
    (d / "continuations" / "gpt41-sft-30.jsonl").unlink()
    assert main(["annotate-export", str(params), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "annotation.overall.setups: the run has no continuations of gpt41-sft-30" in err
    # not evenly: at random over every instance, said in the notes; a task's own seed
    plan = AnnotationSection.model_validate(
        {
            "seed": 1,
            "overall": {"setups": ["gpt41-vanilla-1"], "conversations": 20, "even_over_datasets": False, "seed": 9},
        }
    )
    rep = export_items(Run.open(d), tmp_path / "r", plan=plan)
    s = rep.sample["overall"]
    assert len(s["instances"]) == 10 and s["seed"] == 9 and "fine_grained" not in rep.sample
    assert "drawn at random over every dataset, not evenly (even_over_datasets: false)" in s["notes"]
    with pytest.raises(InputError, match="give at least one task"):
        (tmp_path / "bad.yaml").write_text("name: p\nbench: bench\nannotation: {seed: 1}\n")
        load_params(tmp_path / "bad.yaml")


def test_random_draw_is_stratified_seeded_and_recorded_in_the_run(tmp_path):
    """Beyond the paper: --random N draws N conversations of each target at random, in proportion
    over the datasets, for the fine-grained task, and records them in the run for judge_check."""
    from cocoeval.run.humans import RANDOM_DRAWS, random_draws, recorded_draws

    insts = [instance(f"{'d' if i < 6 else 'e'}/c{i}/0", n_hist=3, n_ref=3) for i in range(9)]
    for i in insts[6:]:
        object.__setattr__(i, "dataset", "e")
    conts = {
        "simA": [
            Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts
        ]
    }
    run = Run.model_validate({"instances": insts, "continuations": conts, "path": tmp_path / "run"})
    (tmp_path / "run").mkdir()
    rep = export_items(run, tmp_path / "x", seed=4, random_per_target=3)
    d = rep.sample["fine_grained"]
    assert d["mode"] == "random" and len(d["targets"]) == 6 and set(rep.sample) == {"fine_grained"}
    assert d["per_stratum"] == {"reference|d": [2, 6], "reference|e": [1, 3], "simA|d": [2, 6], "simA|e": [1, 3]}
    key = json.loads((tmp_path / "x" / "key.json").read_text())
    assert all(v["tasks"] == ["fine_grained"] for v in key.values()) and len(key) == 6
    assert rep.recorded.added and rep.recorded.draw == 1
    record = (tmp_path / "run" / RANDOM_DRAWS).read_bytes()
    again = export_items(run, tmp_path / "y", seed=4, random_per_target=3)
    assert again.sample["fine_grained"]["targets"] == d["targets"]  # seeded
    assert again.recorded == dataclasses.replace(rep.recorded, added=False)  # the same draw is recorded once
    assert (tmp_path / "run" / RANDOM_DRAWS).read_bytes() == record
    other = export_items(run, tmp_path / "z", seed=5, random_per_target=3).sample["fine_grained"]
    drawn = random_draws(tmp_path / "run")
    assert len(json.loads((tmp_path / "run" / RANDOM_DRAWS).read_text())["draws"]) == 2  # every other draw kept
    assert drawn["simA"] == {i for i, t in d["targets"] + other["targets"] if t == "simA"}
    first, second = recorded_draws(tmp_path / "run") or []  # typed records, oldest first
    assert (first.seed, second.seed, first.per_target, first.export) == (4, 5, 3, str(tmp_path / "x"))
    assert first.per_stratum["simA|d"] == (2, 6) and first.conversations == {tuple(p) for p in d["targets"]}
    kept = json.loads((tmp_path / "run" / RANDOM_DRAWS).read_text())["draws"][0]
    assert kept == json.loads(record)["draws"][0]  # the earlier draw written back as it was read
    with pytest.raises(ConfigError, match="at least 1"):
        export_items(run, tmp_path / "w", random_per_target=0)
    (tmp_path / "run" / RANDOM_DRAWS).write_text('{"draws": [{"targets": 3}]}')
    with pytest.raises(InputError, match=r"not a record of random draws \(field draws\.0\.targets"):
        random_draws(tmp_path / "run")


def _random_run(tmp_path):
    insts = [instance(f"{'d' if i < 6 else 'e'}/c{i}/0", n_hist=3, n_ref=3) for i in range(9)]
    for i in insts[6:]:
        object.__setattr__(i, "dataset", "e")
    conts = {
        "simA": [
            Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts
        ]
    }
    (tmp_path / "run").mkdir()
    return Run.model_validate({"instances": insts, "continuations": conts, "path": tmp_path / "run"})


def test_a_random_draw_larger_than_the_run_is_refused_naming_the_most_there_is(tmp_path):
    from cocoeval.run.humans import RANDOM_DRAWS

    run = _random_run(tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"10 conversations of each target asked for, but fewer to draw from: "
        r"reference 9, simA 9",
    ) as e:
        export_items(run, tmp_path / "x", random_per_target=10)
    assert "--random 9" in (e.value.hint or "")
    assert not (tmp_path / "x").exists() and not (tmp_path / "run" / RANDOM_DRAWS).exists()  # nothing written
    assert len(export_items(run, tmp_path / "x", random_per_target=9).sample["fine_grained"]["targets"]) == 18


def test_exclude_annotated_draws_a_further_round_of_the_conversations_nobody_labelled(tmp_path):
    from cocoeval.run.humans import RANDOM_DRAWS, random_draws

    def annotate(folder):
        rows = list(csv.DictReader((folder / "template.csv").open()))
        for r in rows:
            r["annotator"], r["behaviours"] = "ann1", "none"
        with (folder / "filled.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        import_into_run(folder / "filled.csv", tmp_path / "run", key=folder / "key.json")
        return Run.open(tmp_path / "run")

    run = _random_run(tmp_path)
    write_jsonl(tmp_path / "run" / "instances.jsonl", run.instances)
    write_jsonl(tmp_path / "run" / "continuations" / "simA.jsonl", run.continuations["simA"])
    write_json(tmp_path / "run" / "manifest.json", {"name": "r"})
    first = export_items(run, tmp_path / "r1", seed=0, random_per_target=3)
    run = annotate(tmp_path / "r1")
    done = {tuple(x) for x in first.sample["fine_grained"]["targets"]}
    second = export_items(run, tmp_path / "r2", seed=0, random_per_target=3, exclude_annotated=True)
    d = second.sample["fine_grained"]
    assert not done & {tuple(x) for x in d["targets"]} and len(d["targets"]) == 6
    assert d["left_out"] == {"reference": 3, "simA": 3} and sorted(map(tuple, d["excluded"])) == sorted(done)
    assert d["per_stratum"] == {"reference|d": [2, 4], "reference|e": [1, 2], "simA|d": [2, 4], "simA|e": [1, 2]}
    assert second.recorded.draw == 2 and second.recorded.added
    assert not any("outside a recorded random draw" in n for n in d["notes"])  # the first round was random
    # the same command again, now that nothing new is annotated: the same draw, recorded once
    again = export_items(run, tmp_path / "r2b", seed=0, random_per_target=3, exclude_annotated=True)
    assert again.sample["fine_grained"]["targets"] == d["targets"] and not again.recorded.added
    assert len(json.loads((tmp_path / "run" / RANDOM_DRAWS).read_text())["draws"]) == 2
    assert random_draws(tmp_path / "run")["simA"] == {
        i for i, t in done | {tuple(x) for x in d["targets"]} if t == "simA"
    }
    # more than what is left is refused, counting the annotated ones apart
    with pytest.raises(
        ConfigError,
        match=r"fewer to draw from \(not yet annotated\): reference 6 \(3 more already "
        r"annotated\), simA 6 \(3 more already annotated\)",
    ):
        export_items(run, tmp_path / "r3", seed=1, random_per_target=7, exclude_annotated=True)
    with pytest.raises(ConfigError, match="is for a random draw"):
        export_items(run, tmp_path / "r3", exclude_annotated=True)
    # once the second round is annotated, its command still gives its draw (what it left out is recorded) ...
    run = annotate(tmp_path / "r2")
    again = export_items(run, tmp_path / "r2c", seed=0, random_per_target=3, exclude_annotated=True)
    assert again.sample["fine_grained"]["targets"] == d["targets"] and not again.recorded.added
    # ... and another seed draws a third round from the rest
    third = export_items(run, tmp_path / "r3", seed=1, random_per_target=3, exclude_annotated=True)
    assert third.sample["fine_grained"]["left_out"] == {"reference": 6, "simA": 6}
    assert (third.recorded.draw, third.recorded.added) == (3, True)
