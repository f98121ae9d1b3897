"""The judge-free analyses of issue #45 on a run whose frames are kept (``frames.open_run_dir``):
turn-taking (``convstats.speaker_frame``, ``self_selection_frame``) and the classifier test
(``documents.document_frame``) read the kept frames, no continuation or judgment record, and give
exactly what they give computed from the records."""

from __future__ import annotations

import random

import polars as pl

from cocoeval.analysis import analyses, store
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.frames import open_run_dir
from cocoeval.analysis.store import CACHE_DIR
from cocoeval.core.jsonio import recorded_reads
from cocoeval.core.schema import Continuation, Turn
from cocoeval.core.speakers import MALFORMED_NOTE, PASSED_NOTE
from cocoeval.run import Run

from ..sim_helpers import instance, write_run_dir
from .test_stats import fine
from .test_turntaking import PEOPLE, _instances

SETUPS = [
    {"name": "copy", "continuations": "c.jsonl"},
    {"name": "rand", "simulator": "agents", "model": "m", "options": {"policy": "self_selection"}},
    {"name": "mono", "model": "m", "turns_per_call": 30},
]
ANALYSES = ("turn_taking_measured", "detectability")


def _run() -> Run:
    """12 source conversations of 2 windows and a chat; 'copy' (the reference), 'rand' (random
    speakers, self-selection notes, one invalid), 'mono' (Alice only); judge J labels the reference
    and 'copy' (per-speaker fidelity)."""
    rng = random.Random(3)
    insts = [*_instances(seed=5, convs=12, per=2), instance("chat/c0/0", n_hist=4, n_ref=4, chat=True)]
    multi = insts[:-1]
    notes = [
        f"{PASSED_NOTE} 2 passed (Bob, Carol); Alice spoke",
        f"{PASSED_NOTE} 3 passed (A, B, C); every agent passed",
    ]
    conts = {
        "copy": [Continuation(instance_id=i.id, setup_id="copy", turns=i.reference) for i in insts],
        "rand": [
            Continuation(
                instance_id=i.id,
                setup_id="rand",
                turns=[Turn(speaker=rng.choice(PEOPLE), text=f"word {rng.randint(0, 9)}") for _ in i.reference],
                notes=notes[: 1 + k % 2] + ([f"{MALFORMED_NOTE} from the agent of Bob"] if k % 3 == 0 else []),
            )
            for k, i in enumerate(multi[1:])
        ]
        + [Continuation(instance_id=multi[0].id, setup_id="rand", status="invalid", reason="no turns", notes=notes)],
        "mono": [
            Continuation(instance_id=i.id, setup_id="mono", turns=[Turn(speaker="Alice", text="ok")] * len(i.reference))
            for i in multi
        ],
    }
    js = []
    for k, i in enumerate(multi):
        n = len(i.reference)
        js.append(fine(i.id, "reference", "J", [["repetition"] if t % 3 == 0 else [] for t in range(n)]))
        js.append(fine(i.id, "copy", "J", [["repetition"] if (t + k) % 2 == 0 else [] for t in range(n)]))
    return Run.model_validate({"instances": insts, "continuations": conts, "judgments": {"J": js}})


def _tables(run: Run) -> dict[str, pl.DataFrame]:
    p = Params(resamples=60, min_n=2)
    out = {}
    for name in ANALYSES:
        ans = analyses.compute(name, run, p)
        assert ans is not None
        out.update({f"{name}/{k}": v for k, v in ans.tables.items()})
    return out


def test_turn_taking_and_the_classifier_on_kept_frames_equal_what_the_records_give_and_read_no_record(
    tmp_path, monkeypatch
):
    d = tmp_path / "run"
    write_run_dir(d, _run(), {"status": "complete", "params": {"setups": SETUPS}})
    from_records = _tables(Run.open(d))
    assert not (d / CACHE_DIR).exists()  # a run not opened by open_run_dir: computed from its records

    monkeypatch.setattr(store, "_CACHE", {})
    open_run_dir(d)  # what `cocoeval run` does last: keeps the frames, with speakers, self_selection, documents
    [kept] = list((d / CACHE_DIR).glob("frames-*"))
    assert {"speakers.arrow", "self_selection.arrow", "documents.arrow"} <= {p.name for p in kept.iterdir()}

    monkeypatch.setattr(store, "_CACHE", {})  # the next process
    with recorded_reads() as seen:
        from_kept = _tables(open_run_dir(d))
    assert [p for p in seen if "/continuations/" in p or "/judgments/" in p] == []

    assert from_kept.keys() == from_records.keys()
    for k, v in from_records.items():
        assert from_kept[k].equals(v), k
    # the tables are not empty: what they compare is there
    ss = from_kept["turn_taking_measured/self_selection"].row(0, named=True)
    assert ss["continuations"] == 24 and ss["malformed"] == 8 and ss["all_passed"] == 12
    assert from_kept["turn_taking_measured/speaker_fidelity"]["scored"].any()
    auc = from_kept["detectability/detectability"]
    assert auc["auc"].is_not_null().sum() >= 3 and auc.filter(pl.col("target") == "rand")["continuations_ok"][0] == 23
