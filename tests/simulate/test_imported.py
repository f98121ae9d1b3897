"""Continuations written elsewhere: the exported instance format, and every kind of bad record of
an imported file ending as a clear error (file, line, fix) or an invalid entry with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import read_models
from cocoeval.simulate.exchange import (
    ImportedRecord,
    SimulatorInput,
    export_instances,
    import_continuations,
    json_schemas,
    schema_text,
)
from cocoeval.simulate.setup import ImportedSetup

from ..sim_helpers import instance

INSTS = [instance("d/c/0", n_ref=3), instance("d/c/1", n_ref=3), instance("e/c/2", n_ref=3)]
for _i in INSTS[2:]:
    object.__setattr__(_i, "dataset", "e")


def good(iid: str, n: int = 3) -> dict:
    inst = next(i for i in INSTS if i.id == iid)
    return {
        "instance_id": iid,
        "turns": [{"speaker": t.speaker, "text": f"mine {k}"} for k, t in enumerate(inst.reference[:n])],
    }


def write(tmp_path: Path, records: list, raw: str | None = None) -> ImportedSetup:
    p = tmp_path / "mine.jsonl"
    p.write_text(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records))
    return ImportedSetup(name="mine", continuations=str(p), description="my simulator")


def load(setup: ImportedSetup, insts=INSTS, warns: list | None = None):
    return import_continuations(setup, setup.setup_id(), insts, (warns if warns is not None else []).append)


def test_export_writes_what_a_simulator_needs_and_no_reference(tmp_path):
    n = export_instances(INSTS, tmp_path / "in.jsonl")
    rows = read_models(tmp_path / "in.jsonl", SimulatorInput)
    assert n == 3 and [r.id for r in rows] == [i.id for i in INSTS]
    r, inst = rows[0], INSTS[0]
    assert r.n_turns == 3 and r.goals == inst.metadata.goals and r.summary == inst.summary.text
    assert [(p.name, p.role) for p in r.participants] == [(p.name, p.role) for p in inst.metadata.participants]
    assert [t.text for t in r.history] == [t.text for t in inst.history]
    assert r.instance_hash == inst.content_hash() and r.kind == "multiparty"
    text = (tmp_path / "in.jsonl").read_text()
    assert all(t.text not in text for t in inst.reference)  # the human reference stays behind


def test_shipped_schemas_are_the_models_schemas():
    here = Path(__file__).parents[2] / "cocoeval" / "simulate" / "schemas"
    for name in json_schemas():
        assert (here / name).read_text() == schema_text(name), f"regenerate {name} (see exchange.schema_text)"
    assert json_schemas()["continuation.schema.json"]["required"] == ["instance_id", "turns"]


def test_a_good_file_imports_every_record_ok(tmp_path):
    warns: list[str] = []
    setup = write(
        tmp_path,
        [good("d/c/0"), {**good("d/c/1"), "model": "my-llm", "usage": {"output_tokens": 12}, "notes": "seed 3"}],
    )
    c0, c1 = load(setup, warns=warns)
    assert (c0.status, c1.status) == ("ok", "ok") and c0.setup_name == "mine"
    assert [t.text for t in c0.turns] == ["mine 0", "mine 1", "mine 2"]
    assert c1.imported == {"model": "my-llm", "usage": {"output_tokens": 12}, "line": 2} and "seed 3" in c1.notes
    assert c0.instance_hash == INSTS[0].content_hash()
    assert warns == [
        f"imported setup mine: {setup.continuations} has no continuation of 1 of the 3 instances it "
        "selects (counted not simulated)"
    ]


@pytest.mark.parametrize(
    "records,needle",
    [
        (
            [good("d/c/0"), {**good("d/c/1"), "turns": good("d/c/1")["turns"][:2]}],
            "has 2 turn(s) where the reference has 3",
        ),
        (
            [{**good("d/c/0"), "turns": good("d/c/0")["turns"] + [{"speaker": "Alice", "text": "extra"}]}],
            "has 4 turn(s)",
        ),
        (
            [{**good("d/c/0"), "turns": [{"speaker": "", "text": "x"}, *good("d/c/0")["turns"][1:]]}],
            "turn 1 has no speaker",
        ),
        (
            [{**good("d/c/0"), "turns": [{"speaker": "Alice"}, *good("d/c/0")["turns"][1:]]}],
            "turn 1 (Alice) has no text",
        ),
        (
            [{**good("d/c/0"), "turns": [{"speaker": "Alice", "text": 3}, *good("d/c/0")["turns"][1:]]}],
            "turn 1's text (Alice) is a number, not text",
        ),
        (
            [{**good("d/c/0"), "turns": [{"speaker": "A", "text": "t", "emotion": "x"}, *good("d/c/0")["turns"][1:]]}],
            "fields other than speaker and text: emotion",
        ),
    ],
)
def test_records_that_are_no_valid_continuation_are_kept_invalid_with_the_reason(tmp_path, records, needle):
    conts = load(write(tmp_path, records))
    assert len(conts) == len(records)  # kept: never dropped
    bad = [c for c in conts if c.status == "invalid"]
    assert len(bad) == 1 and needle in bad[0].reason and bad[0].reason.startswith("imported continuation: ")


def test_unknown_speakers_are_kept_and_noted(tmp_path):
    rec = good("d/c/0")
    rec["turns"][1]["speaker"] = "Dave"
    [c] = load(write(tmp_path, [rec]))
    assert c.status == "ok" and c.unknown_speakers == ["Dave"] and c.turns[1].speaker == "Dave"
    assert any("Dave" in n for n in c.notes)


def test_another_instance_version_is_invalid_with_the_reason_not_stale(tmp_path):
    right = INSTS[1].content_hash()
    c, d = load(
        write(tmp_path, [{**good("d/c/0"), "instance_hash": "0123456789ab"}, {**good("d/c/1"), "instance_hash": right}])
    )
    assert (
        c.status == "invalid"
        and "made from another version of the instance (instance_hash 0123456789ab; "
        f"the run's instance has {INSTS[0].content_hash()})"
        in c.reason
    )
    assert c.instance_hash == INSTS[0].content_hash()  # checked against this version: current, never stale
    assert c.imported["instance_hash"] == "0123456789ab"  # what the record said, kept
    assert d.status == "ok" and d.instance_hash == right


def test_a_record_of_another_instance_version_counts_once_in_check_run_and_invalid_rates(tmp_path, capsys):
    """Five records, one with a wrong instance_hash: ``import-continuations --check``, the run's
    summary and ``frames.invalid_rates`` all say 4 valid and 1 invalid, with the reason; it is not
    also stale, nor missing (it was 5 valid, 5 ok, then 1 stale and 1 missing: 13 of 12)."""
    import polars as pl
    import yaml

    from cocoeval.analysis.frames import invalid_rates, run_frames
    from cocoeval.cli import main
    from cocoeval.core.jsonio import write_jsonl
    from cocoeval.run import Run

    insts = [instance(f"d/c{k}/0", n_ref=3) for k in range(5)]
    write_jsonl(tmp_path / "bench" / "eval.jsonl", insts)
    write_jsonl(tmp_path / "bench" / "train.jsonl", [])
    recs = [
        {
            "instance_id": i.id,
            "instance_hash": i.content_hash(),
            "turns": [{"speaker": t.speaker, "text": f"mine {k}"} for k, t in enumerate(i.reference)],
        }
        for i in insts
    ]
    recs[2]["instance_hash"] = "0123456789abcdef"
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    p = tmp_path / "p.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "m",
                "out": "run",
                "bench": "bench",
                "llm": {"cache": "c.sqlite"},
                "setups": [{"name": "mine", "continuations": "mine.jsonl"}],
            }
        )
    )
    why = "made from another version of the instance"
    assert main(["import-continuations", str(tmp_path / "mine.jsonl"), str(p), "--setup", "mine", "--check"]) == 0
    out = capsys.readouterr().out
    assert "5 continuation(s) of 5 selected instance(s); 4 valid, 1 invalid" in out and f"invalid (1): {why}" in out
    assert main(["run", str(p), "--no-progress"]) == 3  # something ended invalid
    run = Run.open(tmp_path / "run")
    summary = run.manifest.summary["simulate"]["mine"]
    assert (summary["total"], summary["ok"], summary["invalid"]) == (5, 4, 1)
    assert any(why in r for r in summary["reasons"])
    f = run_frames(run)
    rate = invalid_rates(f).filter(pl.col("stage") == "simulate").row(0, named=True)
    assert {k: rate[k] for k in ("n", "invalid", "stale", "missing")} == {
        "n": 5,
        "invalid": 1,
        "stale": 0,
        "missing": 0,
    }
    [bad] = f.continuations.filter(pl.col("status") != "ok").iter_rows(named=True)
    assert bad["status"] == "invalid" and why in bad["reason"] and bad["instance_id"] == insts[2].id


@pytest.mark.parametrize(
    "raw,needle",
    [
        ('{"instance_id": "d/c/0", "turns": [}\n', "line 1"),
        ("[1, 2]\n", "line 1"),
        ('{"turns": []}\n', "instance_id"),
        ('{"instance_id": "d/c/0", "turns": "Alice: hi"}\n', "turns"),
        ('{"instance_id": "d/c/0", "turns": [], "turn": []}\n', "turn: Extra inputs"),
        ('{"instance_id": "nope", "turns": []}\n', "instance 'nope' is not among the run's 3 instances"),
        (json.dumps(good("d/c/0")) + "\n" + json.dumps(good("d/c/0")) + "\n", "is here twice (lines 1 and 2)"),
        ("", "empty"),
        ('{"instance_id": "d/c/0", "turns": [], "notes": 7}\n', "notes"),
    ],
)
def test_unreadable_records_are_errors_naming_file_and_line(tmp_path, raw, needle):
    setup = write(tmp_path, [], raw=raw)
    with pytest.raises(InputError) as e:
        load(setup)
    assert "mine.jsonl" in str(e.value) and needle in str(e.value), str(e.value)


def test_records_of_instances_the_setup_does_not_select_are_left_out_and_said(tmp_path):
    setup = write(tmp_path, [good("d/c/0"), good("e/c/2")]).model_copy(update={"datasets": ["d"]})
    warns: list[str] = []
    [c] = load(setup, warns=warns)
    assert c.instance_id == "d/c/0"
    assert any("1 record(s)" in w and "does not select" in w for w in warns)


def test_setup_id_hashes_the_file_and_the_description(tmp_path):
    a = write(tmp_path, [good("d/c/0")])
    sid = a.setup_id()
    assert a.model_copy(update={"name": "renamed"}).setup_id() == sid
    assert a.model_copy(update={"description": "other"}).setup_id() != sid
    Path(a.continuations).write_text(json.dumps(good("d/c/1")) + "\n")
    assert a.setup_id() != sid
    with pytest.raises(InputError, match="cannot read the continuations"):
        ImportedSetup(name="m", continuations=str(tmp_path / "missing.jsonl")).setup_id()


def test_record_model_documents_every_field():
    assert set(ImportedRecord.model_fields) == {"instance_id", "turns", "model", "notes", "usage", "instance_hash"}
