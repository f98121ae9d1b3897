"""Label Studio exchange (#46 item 5), through the command line: annotate-export --format labelstudio
writes tasks and a labelling config that fit each other; an annotator's Label Studio JSON export
(simulated here: no Label Studio server runs in the tests) is read by annotate-import with the
checks of the CSV import, and the agreement among the annotators is printed."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from cocoeval.annotate import labelstudio
from cocoeval.cli import main
from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Continuation
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import instance

HOSTILE = '<script>alert("x")</script> & </Text><Choices name="evil"/>'


@pytest.fixture
def exported(tmp_path, capsys):
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    insts[0].reference[1].text = HOSTILE
    conts = [Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts]
    d = tmp_path / "run"
    write_jsonl(d / "instances.jsonl", insts)
    write_jsonl(d / "continuations" / "simA.jsonl", conts)
    tax = load_taxonomy()
    write_json(d / "manifest.json", {"taxonomy": {"name": tax.name, "hash": tax.hash}})
    out = tmp_path / "out"
    args = ["annotate-export", str(d), "--out", str(out), "--format", "labelstudio"]
    assert main([*args, "--overall-conversations", "4", "--fine-conversations", "4"]) == 0
    printed = capsys.readouterr().out
    assert "labelstudio/tasks.json" in printed and "labelstudio/config.xml" in printed and "--key" in printed
    return d, out


def _controls(config: ET.Element) -> dict[str, ET.Element]:
    return {e.get("name", ""): e for e in config.iter() if e.get("toName")}


def test_the_tasks_and_the_labelling_config_fit_each_other_and_carry_no_hint_or_markup(exported):
    _, out = exported
    config = ET.fromstring((out / "labelstudio" / "config.xml").read_text())
    tasks = json.loads((out / "labelstudio" / "tasks.json").read_text())
    key = json.loads((out / "key.json").read_text())
    assert len(tasks) == len(key) == 4 and {t["data"]["item_id"] for t in tasks} == set(key)
    objects = {e.get("name"): e for e in config.iter() if e.get("value", "").startswith("$") and e.get("name")}
    controls = _controls(config)
    # every control labels an object of the config; every $variable is in every task's data
    assert all(c.get("toName") in objects for c in controls.values())
    variables = {v for e in config.iter() for v in re.findall(r"\$(\w+)", e.get("value", ""))}
    assert all(variables <= set(t["data"]) for t in tasks)
    tax = load_taxonomy()
    slots = [c for n, c in controls.items() if n.startswith("behaviours_")]
    assert len(slots) == 3  # the three judged turns of an item
    for c in slots:
        assert c.tag == "Choices" and c.get("choice") == "multiple"
        assert [x.get("value") for x in c] == ["none", *(b.name for b in tax.behaviours)]
    assert {controls[s].tag for s in ("consistency", "collaborativeness")} == {"Rating"}
    assert controls["consistency"].get("maxRating") == "10"
    # blind: no setup name or target; the hostile turn is task data (shown as text), never config
    text = (out / "labelstudio" / "tasks.json").read_text()
    assert "simA" not in text and "reference" not in text and "idA" not in text
    assert "evil" not in (out / "labelstudio" / "config.xml").read_text()
    assert any(HOSTILE in t["data"]["context"] for t in tasks)
    # the context reads as the page's: goals joined, each participant with role and stance
    ctx = tasks[0]["data"]["context"]
    assert "Goals: " in ctx and "['" not in ctx and "Participants: " in ctx


def _annotation(task: dict, who, pick, scores=(7, 5), cancelled: bool = False) -> dict:
    """What Label Studio exports for one annotator's submission of ``task``: ``pick(slot, turn)``
    gives the ticked choices (None: the slot left unticked)."""
    data, result = task["data"], []
    k = 1
    while f"turn_{k}_number" in data:
        if data[f"turn_{k}_number"] is not None and (choices := pick(k, data[f"turn_{k}_number"])) is not None:
            result.append(
                {
                    "id": f"r{k}",
                    "from_name": f"behaviours_{k}",
                    "to_name": f"turn_{k}",
                    "type": "choices",
                    "value": {"choices": choices},
                }
            )
        k += 1
    if "overall" in data["tasks"] and scores:
        result += [
            {"id": f"s{n}", "from_name": n, "to_name": "context", "type": "rating", "value": {"rating": v}}
            for n, v in zip(labelstudio.SCORES, scores, strict=True)
        ]
    return {"id": 100, "completed_by": who, "result": result, "was_cancelled": cancelled, "lead_time": 12.5}


def _export(out, path, annotators) -> None:
    """Label Studio's JSON export: the tasks with their ids and every annotator's annotation."""
    tasks = json.loads((out / "labelstudio" / "tasks.json").read_text())
    path.write_text(
        json.dumps(
            [
                {"id": n, **t, "annotations": [_annotation(t, who, pick) for who, pick in annotators]}
                for n, t in enumerate(tasks, start=1)
            ]
        )
    )


def test_export_fill_import_and_the_agreement_is_printed(exported, tmp_path, capsys):
    d, out = exported

    def ann(k, turn):
        return ["Repetition", "off topic"] if turn == 2 else ["none"]

    def bea(k, turn):
        return ["Repetition"] if turn == 2 else ["none"]

    ls = tmp_path / "project-1-export.json"
    _export(out, ls, [(1, ann), ({"id": 2, "email": "bea@lab.example"}, bea)])
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 0
    printed = capsys.readouterr().out
    assert "annotator ls-1:" in printed and "annotator ls-2:" in printed and "bea" not in printed
    assert "repaired: 'off topic'" in printed  # repaired as in the CSV import, and said
    assert "Krippendorff's α (nominal) per behaviour among 2 annotator(s)" in printed
    assert re.search(r"Repetition: α 1\.00", printed)
    run = Run.open(d)
    fine = [j for j in run.human["ls-1"] if j.kind == "fine_grained"]
    assert len(fine) == 4 and all(j.status == "repaired" for j in fine)  # "off topic" read as Off topic
    assert all([lb.behaviours for lb in j.labels] == [[], ["repetition", "off_topic"], []] for j in fine)
    over = [j for j in run.human["ls-2"] if j.kind == "overall"]
    assert len(over) == 4 and all((j.consistency, j.collaborativeness) == (7, 5) for j in over)
    # the same export again changes nothing
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 0
    assert "nothing new (already imported)" in capsys.readouterr().out


def test_an_unticked_turn_is_not_annotated_and_its_conversation_invalid_naming_the_turn(exported, tmp_path, capsys):
    d, out = exported
    ls = tmp_path / "e.json"
    _export(out, ls, [(3, lambda k, turn: None if turn == 3 else ["none"])])
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 0
    printed = capsys.readouterr().out
    assert "not annotated, skipped: item" in printed and "slot 3" in printed
    assert "4 invalid" in printed and "turn" in printed


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda t: t["annotations"][0]["result"][0]["value"].update(choices=["Grumpiness"]), "unknown behaviour"),
        (lambda t: t["data"].update(item_id="no-such-item"), "unknown item_id 'no-such-item'"),
        (lambda t: t["annotations"][0]["result"][0].update(from_name="sentiment"), "a control the labelling config"),
        (lambda t: t["annotations"][0]["result"][0]["value"].update(choices="none"), "not a list of texts"),
        (lambda t: t["annotations"][0].update(completed_by="someone"), "not a user id"),
        (lambda t: t.pop("data"), "a task without a data object"),
    ],
)
def test_a_bad_export_is_refused_naming_file_task_and_annotation_and_nothing_is_written(
    exported, tmp_path, capsys, change, needle
):
    d, out = exported
    ls = tmp_path / "bad.json"
    _export(out, ls, [(1, lambda k, turn: ["none"])])
    tasks = json.loads(ls.read_text())
    change(tasks[1])
    ls.write_text(json.dumps(tasks))
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(ls) in err and "task 2" in err
    assert not (d / "judgments" / "human").exists()


def test_a_cancelled_annotation_is_left_out_with_a_note_and_an_oversize_file_is_refused(
    exported, tmp_path, capsys, monkeypatch
):
    d, out = exported
    tasks = json.loads((out / "labelstudio" / "tasks.json").read_text())
    ls = tmp_path / "c.json"
    ls.write_text(
        json.dumps(
            [
                {
                    "id": n,
                    **t,
                    "annotations": [
                        _annotation(t, 1, lambda k, turn: ["none"]),
                        _annotation(t, 2, lambda k, turn: ["none"], cancelled=True),
                    ],
                }
                for n, t in enumerate(tasks, start=1)
            ]
        )
    )
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 0
    printed = capsys.readouterr().out
    assert "cancelled (skipped) in Label Studio" in printed and "annotator ls-2" not in printed
    monkeypatch.setattr(labelstudio, "MAX_SHEET_BYTES", 1000)
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json"), "--dry-run"]) == 2
    assert str(ls) in capsys.readouterr().err
    monkeypatch.undo()
    (tmp_path / "tasks-only.json").write_text((out / "labelstudio" / "tasks.json").read_text())
    assert main(["annotate-import", str(tmp_path / "tasks-only.json"), str(d), "--key", str(out / "key.json")]) == 2
    assert "no annotation in the export" in capsys.readouterr().err


def test_two_users_whose_emails_share_the_part_before_the_at_stay_two_annotators_and_no_email_is_stored(
    exported, tmp_path, capsys
):
    d, out = exported
    ls = tmp_path / "two-als.json"
    _export(
        out,
        ls,
        [
            ({"id": 7, "email": "al@a.org"}, lambda k, t: ["none"]),
            ({"id": 8, "email": "al@b.org"}, lambda k, t: ["none"]),
        ],
    )
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 0
    printed = capsys.readouterr().out
    assert "annotator ls-7:" in printed and "annotator ls-8:" in printed
    assert "among 2 annotator(s)" in printed and "duplicate" not in printed
    assert set(Run.open(d).human) == {"ls-7", "ls-8"}
    stored = "".join(f.read_text() for f in (d / "judgments" / "human").rglob("*") if f.is_file())
    assert "al@" not in stored and '"al"' not in stored


def test_a_huge_integer_in_a_label_studio_export_or_a_jsonl_sheet_is_refused_naming_the_file(
    exported, tmp_path, capsys
):
    d, out = exported
    ls = tmp_path / "huge.json"
    _export(out, ls, [(1, lambda k, t: ["none"])])
    ls.write_text(ls.read_text().replace('"id": 1,', '"id": ' + "9" * 5000 + ",", 1))
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 2
    err = capsys.readouterr().err
    assert str(ls) in err and "please report" not in err
    sheet = tmp_path / "huge.jsonl"
    sheet.write_text('{"annotator": "al", "item_id": "x", "turn": ' + "9" * 5000 + "}\n")
    assert main(["annotate-import", str(sheet), str(d), "--key", str(out / "key.json")]) == 2
    err = capsys.readouterr().err
    assert str(sheet) in err and "line 1" in err and "please report" not in err
    csv = tmp_path / "huge.csv"
    key = json.loads((out / "key.json").read_text())
    csv.write_text("annotator,item_id,turn,behaviours\nal," + next(iter(key)) + "," + "9" * 5000 + ",none\n")
    code = main(["annotate-import", str(csv), str(d), "--key", str(out / "key.json")])
    captured = capsys.readouterr()
    assert code in (0, 2) and "please report" not in captured.err
    assert "turn must be" in captured.out + captured.err


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda text: text.replace('"id": 1,', '"id": 1, "id": 2,', 1), "key 'id' given twice"),
        (lambda text: "[" * 100_000 + text + "]" * 100_000, "nested too deeply"),
        (lambda text: text.replace('"id": 1,', '"id": ' + "9" * 5000 + ",", 1), "not readable as JSON"),
    ],
    ids=["duplicate key", "too deep", "5000 digits"],
)
def test_a_label_studio_export_with_a_duplicate_key_a_too_deep_nesting_or_a_huge_number_is_refused_naming_file_and_fix(
    exported, tmp_path, capsys, damage, needle
):
    d, out = exported
    ls = tmp_path / "damaged.json"
    _export(out, ls, [(1, lambda k, t: ["none"])])
    ls.write_text(damage(ls.read_text()))
    assert main(["annotate-import", str(ls), str(d), "--key", str(out / "key.json")]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(ls) in err and "please report" not in err
    assert "Label Studio exported" in err  # the fix: the export step of Label Studio
    assert not (d / "judgments" / "human").exists()
