"""The probe tables' pieces (beyond the paper): model families, Cohen's κ, the self-preference gap
computed by hand on a synthetic run, and the probes' constructions (names replaced everywhere,
one planted behaviour per copy)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from cocoeval.analysis.probes import (
    cohen_kappa,
    model_family,
    probe_tables,
    probe_text,
    self_preference,
)
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.targets import targets_for
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.probes import (
    PLANTED,
    anonymise,
    expected_behaviour,
    letters,
    plant,
    templates_version,
)
from cocoeval.run import Run
from cocoeval.run.rundir import Manifest
from tests.sim_helpers import instance

TAX = load_taxonomy()


@pytest.mark.parametrize(
    "spec, fam",
    [
        ("openai/gpt-4.1-2025-04-14", "openai"),
        ("azure/o4-mini", "openai"),
        ("openai/ft:gpt-4.1:org:x:1", "openai"),
        ("anthropic/claude-opus-4-20250514", "anthropic"),
        ("local/smollm2", "smollm"),
        ("openai-compatible/meta-llama/Llama-3.1-8B@http://h:8000/v1", "llama"),
        ("openai-compatible/Qwen2.5-7B@http://h/v1", "qwen"),
        ("openai-compatible/fake@http://127.0.0.1:1/v1", None),
        (None, None),
    ],
)
def test_model_family(spec, fam):
    assert model_family(spec) == fam


def test_kappa_equals_sklearn():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    assert np.isnan(cohen_kappa(np.ones(5), np.ones(5)))


def _judgment(iid, target, kind, c=None, k=None, reps=0):
    labels = [TurnLabel(turn=t, behaviours=["repetition"] if t < reps else []) for t in range(4)]
    return Judgment(
        instance_id=iid,
        target=target,
        target_name=target,
        judge_id="jid",
        judge_name="j",
        kind=kind,
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
        labels=labels if kind == "fine_grained" else [],
        judged_turns=list(range(4)),
    )


def _run(setups: dict[str, str], n: int = 12) -> Run:
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(n)]
    value = {"reference": (5, 5, 2), "gpt": (7, 6, 0), "claude": (5, 5, 2), "llama": (6, 5, 3)}
    js, conts = [], {}
    for s in setups:
        conts[s] = [Continuation(instance_id=i.id, setup_id=s, setup_name=s, turns=i.reference) for i in insts]
    for i in insts:
        for t in ["reference", *setups]:
            c, k, r = value[t]
            c += (int(i.id.split("/")[1][1:]) % 2) if t == "gpt" else 0  # gpt's own gap varies by instance: an interval
            js += [_judgment(i.id, t, "overall", c, k), _judgment(i.id, t, "fine_grained", reps=r)]
    params = {
        "judges": [{"name": "j", "model": "openai/gpt-4.1"}],
        "setups": [{"name": s, "model": m} for s, m in setups.items()],
    }
    return Run(manifest=Manifest(params=params), instances=insts, continuations=conts, judgments={"j": js})


def test_self_preference_gap_by_hand():
    run = _run(
        {"gpt": "openai/gpt-4o", "claude": "anthropic/claude-3", "llama": "openai-compatible/llama-3@http://h/v1"}
    )
    t = self_preference(run, "j", resamples=300)
    row = {r["measure"]: r for r in t.iter_rows(named=True)}
    # the judge's family (openai): gpt; the others: claude (diff 0) and llama (diff +1 Likert, +1 repetition)
    assert row["any"]["same"] == -2 and row["any"]["other"] == 0.5 and row["any"]["gap"] == -2.5
    assert row["repetition"]["gap"] == -2.5 and row["collaborativeness"]["gap"] == 1.0 - 0.0
    gpt_c = np.mean([7 + int(i.id.split("/")[1][1:]) % 2 - 5 for i in run.instances])
    assert row["consistency"]["gap"] == pytest.approx(gpt_c - 0.5)
    assert row["consistency"]["n"] == 12 and row["consistency"]["ci_low"] is not None
    assert row["any"]["ci_low"] is None  # every instance the same gap: no zero-width interval
    assert row["any"]["same_setups"] == "gpt" and row["any"]["other_setups"] == "claude, llama"
    text = probe_text(probe_tables(run, "j", resamples=100))
    assert text[0] == "Judge probes (beyond the paper):"
    assert text[1] == "names, planted behaviours, stability: not run: cocoeval probe PARAMS"
    assert any(line.startswith("self-preference (openai: gpt vs claude, llama), consistency") for line in text)


def test_self_preference_counts_what_the_statistics_count():
    """A judgment the statistics do not count (skipped: no turn to judge; invalid) is in no pair:
    never a zero. The table is made from the frames, as every other statistic."""
    from cocoeval.core.targets import NO_TURNS

    run = _run({"gpt": "openai/gpt-4o", "claude": "anthropic/claude-3"})
    full = {r["measure"]: r for r in self_preference(run, "j", resamples=100).iter_rows(named=True)}
    first = run.instances[0].id
    run.judgments["j"] = [
        j.model_copy(update={"labels": [], "judged_turns": [], "reason": NO_TURNS})
        if (j.instance_id, j.target, j.kind) == (first, "gpt", "fine_grained")
        else j.model_copy(update={"status": "invalid", "reason": "bad"})
        if (j.instance_id, j.target, j.kind) == (first, "claude", "overall")
        else j
        for j in run.judgments["j"]
    ]
    row = {r["measure"]: r for r in self_preference(run, "j", resamples=100).iter_rows(named=True)}
    assert full["any"]["n"] == 12 and row["any"]["n"] == 11 and row["any"]["same"] == -2  # not -2 with a 0 in it
    assert row["consistency"]["n"] == 11 and row["collaborativeness"]["n"] == 11


def test_no_self_preference_without_both_families():
    run = _run({"claude": "anthropic/claude-3", "llama": "openai-compatible/llama-3@http://h/v1"})
    assert self_preference(run, "j").is_empty()
    assert any("self-preference: not computed" in line for line in probe_text(probe_tables(run, "j")))


def test_names_are_replaced_in_m_s_x_and_the_turns():
    inst = instance("d/c0/0", n_hist=3, n_ref=3)
    inst = inst.model_copy(
        update={
            "summary": inst.summary.model_copy(update={"text": "Alice asked Bob; Alicette left."}),
            "metadata": inst.metadata.model_copy(update={"goals": ["Carol's budget"]}),
        }
    )
    ref = inst.reference
    ref[0] = ref[0].model_copy(update={"text": "Thanks Bob, and Carol too."})
    [t] = targets_for([inst], {})
    new, mapping = anonymise(t)
    assert mapping == {"Alice": "A", "Bob": "B", "Carol": "C"}
    assert new.instance.summary.text == "A asked B; Alicette left."  # whole names only
    assert new.instance.metadata.goals == ["C's budget"]
    assert [p.name for p in new.instance.metadata.participants] == ["A", "B", "C"]
    assert [x.speaker for x in new.instance.history] == ["A", "B", "C"]
    assert new.turns[0].text == "Thanks B, and C too." and new.turns[0].speaker == "A"
    assert t.instance.summary.text.startswith("Alice")  # the source is untouched
    assert [letters(i) for i in (0, 25, 26, 27)] == ["A", "Z", "AA", "AB"]
    chat = targets_for([instance("c/c0/0", chat=True)], {})[0]
    assert anonymise(chat)[1] == {}


def test_one_planted_behaviour_per_copy():
    [t] = targets_for([instance("d/c0/0", n_hist=3, n_ref=6)], {})
    assert templates_version() == "cocoeval-probe-templates@1"
    for b in PLANTED:
        p = plant(t, b, random.Random(0))
        assert p is not None and p.expects == expected_behaviour(b) and TAX.get(p.expects) is not None
        changed = [i for i, (x, y) in enumerate(zip(t.turns, p.target.turns, strict=True)) if x.text != y.text]
        assert changed == [p.turn] and p.target.turns[p.turn].speaker == t.turns[p.turn].speaker
        assert "{" not in p.changed["after"]
    own = plant(t, "contradiction", random.Random(0))
    assert own is not None
    earlier = [x.text for x in [*t.instance.history, *t.turns[: own.turn]] if x.speaker == t.turns[own.turn].speaker]
    assert earlier[-1] in own.changed["after"]
    # a contradiction needs the speaker's own earlier turn
    [first] = targets_for([instance("d/c1/0", n_hist=1, n_ref=1)], {})
    assert plant(first, "contradiction", random.Random(0)) is None


# ------------------------------------------------------------------ the probe tables' rules, by hand

N_TURNS = 25


def _ref(
    iid: str, kind: str, labels: dict[int, list[str]] | None = None, c: int | None = None, k: int | None = None
) -> Judgment:
    """A judgment of ``iid``'s reference (25 turns) by judge "j"."""
    return Judgment(
        instance_id=iid,
        target="reference",
        target_name="reference",
        judge_id="jid",
        judge_name="j",
        kind=kind,
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
        labels=[TurnLabel(turn=t, behaviours=(labels or {}).get(t, [])) for t in range(N_TURNS)]
        if kind == "fine_grained"
        else [],
        judged_turns=list(range(N_TURNS)),
    )


def _probed_run(tmp_path, records, n: int) -> Run:
    """A run in ``tmp_path`` of ``n`` instances whose references judge "j" judged with no label and
    Likert 5, 5, and whose probe file holds ``records``."""
    from cocoeval.core.jsonio import write_jsonl
    from cocoeval.run.probes import PROBES_DIR

    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=N_TURNS) for i in range(n)]
    js = [_ref(i.id, "fine_grained") for i in insts] + [_ref(i.id, "overall", c=5, k=5) for i in insts]
    (tmp_path / PROBES_DIR).mkdir()
    write_jsonl(tmp_path / PROBES_DIR / "j.jsonl", records)
    return Run(path=tmp_path, instances=insts, judgments={"j": js})


def _names_tables(tmp_path, changed: dict[str, int], likert: dict[str, list[int]], n: int = 8):
    """The names table when the letters' judgment labels behaviour b on the first ``changed[b]`` of
    the n x 25 turns (in order: target after target) and moves each Likert score of target i by
    ``likert[d][i]``. Fewer than ten targets: no interval, the value decides the flag."""
    from cocoeval.run.probes import ProbeRecord

    recs = []
    for i in range(n):
        iid = f"d/c{i}/0"
        labels = {t: [b for b, k in changed.items() if i * N_TURNS + t < k] for t in range(N_TURNS)}
        moved = {d: 5 + likert[d][i] for d in ("consistency", "collaborativeness")}
        for kind, j in (
            ("fine_grained", _ref(iid, "fine_grained", labels)),
            ("overall", _ref(iid, "overall", c=moved["consistency"], k=moved["collaborativeness"])),
        ):
            recs.append(
                ProbeRecord(
                    probe="names",
                    judge="j",
                    kind=kind,
                    instance_id=iid,
                    target="reference",
                    target_id="reference",
                    judgment=j,
                )
            )
    names = probe_tables(_probed_run(tmp_path, recs, n), "j", resamples=50)["names"]
    return {r["measure"]: r for r in names.iter_rows(named=True)}


def test_the_names_probe_flags_a_change_above_five_percent_of_turn_labels_or_half_a_point_not_at_it(tmp_path):
    """The flag is where the change passes the tolerance (strictly): 10 of 200 turn labels (5%) and a
    mean change of 0.5 Likert points are accepted, 11 of 200 (5.5%) and 0.625 points are flagged,
    9 of 200 (4.5%) is accepted."""
    row = _names_tables(
        tmp_path,
        {"repetition": 10, "off_topic": 11, "unclear_intent": 9},
        {"consistency": [-2, 1, 1, 0, 0, 0, 0, 0], "collaborativeness": [1, -1, 1, 1, 1, 0, 0, 0]},
    )
    for measure, changed, flag in (
        ("repetition", 10, False),
        ("off_topic", 11, True),
        ("unclear_intent", 9, False),
        ("misunderstanding", 0, False),
        ("any", 11, True),
    ):
        r = row[measure]
        assert (r["n_targets"], r["n"], r["changed"]) == (8, 200, changed), measure
        assert r["value"] == changed / 200 and r["ci_low"] is None and "too small" in r["ci_note"]
        assert r["flag"] is flag, measure
    assert row["repetition"]["value"] == 0.05  # exactly the tolerance
    cons, coll = row["consistency"], row["collaborativeness"]
    assert (cons["value"], cons["changed"], cons["flag"]) == (0.5, 3, False)  # (2 + 1 + 1) / 8: exactly half a point
    assert (coll["value"], coll["changed"], coll["flag"]) == (0.625, 5, True)  # 5 / 8


def test_the_names_probe_accepts_a_change_just_below_the_tolerance(tmp_path):
    row = _names_tables(
        tmp_path, {"repetition": 1}, {"consistency": [1, 1, 1, 0, 0, 0, 0, 0], "collaborativeness": [0] * 8}
    )
    assert row["repetition"]["value"] == 1 / 200 and not row["repetition"]["flag"]
    assert row["consistency"]["value"] == 3 / 8 and not row["consistency"]["flag"]
    assert row["collaborativeness"]["value"] == 0 and not row["collaborativeness"]["flag"]


def test_a_planted_turn_is_detected_only_when_labelled_with_the_planted_behaviour(tmp_path):
    """Four copies with repetition planted on turn 2, the judge's labels of that turn: the expected
    behaviour (detected); another behaviour only (not detected: "other labels"); both (detected);
    none, with a label on another turn instead (not detected: a false alarm)."""
    from cocoeval.run.probes import ProbeRecord

    planted_turn = {0: ["repetition"], 1: ["off_topic"], 2: ["off_topic", "repetition"], 3: []}
    recs = []
    for i, got in planted_turn.items():
        iid = f"d/c{i}/0"
        labels = {2: got, **({0: ["unclear_intent"]} if i == 3 else {})}
        recs.append(
            ProbeRecord(
                probe="planted",
                judge="j",
                kind="fine_grained",
                instance_id=iid,
                target="reference",
                target_id="reference",
                behaviour="repetition",
                expects="repetition",
                turn=2,
                judgment=_ref(iid, "fine_grained", labels),
            )
        )
    planted = probe_tables(_probed_run(tmp_path, recs, 4), "j", resamples=50)["planted"]
    [r] = planted.iter_rows(named=True)
    assert (r["behaviour"], r["expects"], r["n"]) == ("repetition", "repetition", 4)
    assert r["detected"] == 2 and r["rate"] == 0.5  # copies 0 and 2, not copy 1 (off topic only) nor 3
    assert r["other_label"] == 1  # copy 1
    # false alarms: one label added on the 24 other turns of copy 3, none elsewhere; the references have none
    assert r["fa_n"] == 4 and r["false_alarms"] == pytest.approx((1 / 24) / 4)
