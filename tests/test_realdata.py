"""The builder on the real human conversations in ../shared/data (skipped when absent)."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict

import pytest

from cocoeval import BuildConfig, SourceReport, build, load_conversations, load_instances
from cocoeval.core.jsonio import iter_jsonl, read_json
from cocoeval.sources import clean_transcript

pytestmark = pytest.mark.realdata
ARTEFACT = re.compile(r"\{\s*[a-z_]+\s*\}", re.I)


@pytest.fixture(scope="module")
def real_build(tmp_path_factory):
    from .conftest import SHARED_DATA

    if not (SHARED_DATA / "qmsum").is_dir() or not (SHARED_DATA / "iq2-corpus").is_dir():
        pytest.skip(f"real human data not present at {SHARED_DATA}")
    out = tmp_path_factory.mktemp("real")
    report = build(
        [f"qmsum:{SHARED_DATA / 'qmsum'}", f"convokit:{SHARED_DATA / 'iq2-corpus'}"],
        out,
        BuildConfig(per_dataset=50, seed=0),
    )
    return SHARED_DATA, out, report


def test_every_domain_and_iq2_build_the_papers_counts(real_build):
    _, _out, report = real_build
    ds = report["datasets"]
    assert set(ds) == {"qmsum_product", "qmsum_academic", "qmsum_committee", "iq2"}
    for name, d in ds.items():
        assert d["eval_instances"] == 50, (name, d)
        assert d["train_instances"] > 0, (name, d)
    skipped = {s["conversation"]: s["reason"] for s in report["skipped_conversations"]}
    assert "too short" in skipped["us-israel"]  # the one-utterance transcript in the corpus


def test_instances_are_30_plus_30_contiguous_in_the_source(real_build):
    shared, out, report = real_build
    instances = load_instances(out, None)
    raw_cache: dict[str, list] = {}
    canonical = {
        (m["file"], label): m["canonical"]  # a person's labels merged into one (QMSum)
        for src in report["sources"]
        for m in src["merged_speakers"]
        for label in m["labels"]
    }
    for inst in instances:
        assert len(inst.history) == 30 and len(inst.reference) == 30
        turns = inst.history + inst.reference
        idx = [t.source_index for t in turns]
        assert idx == sorted(set(idx))
        src = inst.provenance.source_file  # relative to the folder holding the source (build.portable)
        if src not in raw_cache:
            if inst.provenance.source_format == "qmsum":
                raw_cache[src] = [(t["speaker"], t["content"]) for t in read_json(shared / src)["meeting_transcripts"]]
            else:
                by_conv = defaultdict(list)
                for _, u in iter_jsonl(shared / src):
                    by_conv[u["conversation_id"]].append(u)
                raw_cache[src] = {
                    k: [(u["speaker"], u["text"]) for u in sorted(v, key=lambda u: u["timestamp"])]
                    for k, v in by_conv.items()
                }
        raw = raw_cache[src]
        if isinstance(raw, dict):
            raw = raw[inst.provenance.conversation_id]
        for t in turns:  # each turn is its source utterance, cleaned
            speaker, text = raw[t.source_index]
            assert t.speaker == canonical.get((src, speaker.strip()), speaker.strip())
            assert t.text == (
                clean_transcript(text) if inst.provenance.source_format == "qmsum" else " ".join(text.split())
            )
        for a, b in itertools.pairwise(idx):  # gaps only where the source turn was dropped
            for gap in range(a + 1, b):
                speaker, text = raw[gap]
                assert speaker == "RESULTS" or not clean_transcript(text), (inst.id, gap, text[:80])


def test_no_artefact_left_and_train_eval_disjoint(real_build):
    _, out, _ = real_build
    ev, tr = load_instances(out, "eval"), load_instances(out, "train")
    for inst in ev + tr:
        for t in inst.history + inst.reference:
            assert not ARTEFACT.search(t.text), (inst.id, t.text)
        assert not ARTEFACT.search(inst.summary.text)
    key = lambda i: (i.dataset, i.provenance.conversation_id)  # noqa: E731
    assert not {key(i) for i in ev} & {key(i) for i in tr}


def test_real_build_is_deterministic(real_build, tmp_path):
    data, out, _ = real_build
    again = tmp_path / "again"
    build([f"qmsum:{data / 'qmsum'}", f"convokit:{data / 'iq2-corpus'}"], again, BuildConfig(per_dataset=50, seed=0))
    for f in ("eval.jsonl", "train.jsonl"):
        assert (again / f).read_bytes() == (out / f).read_bytes()


def test_iq2_loader_on_real_corpus(shared_data):
    rep = SourceReport()
    convs = {c.id: c for c in load_conversations(f"convokit:{shared_data / 'iq2-corpus'}", rep)}
    assert len(convs) == 23
    n_results = sum(
        1 for _, u in iter_jsonl(shared_data / "iq2-corpus" / "utterances.jsonl") if u["speaker"] == "RESULTS"
    )
    assert n_results > 0 and rep.dropped_turns["pseudo-speaker (e.g. RESULTS)"] == n_results
    assert all(t.speaker != "RESULTS" for c in convs.values() for t in c.turns)
    men = convs["men-are-finished"]
    assert men.goals == ["Debate the motion: Men Are Finished"]
    stances = {p.name: p.stance for p in men.participants}
    assert stances["HANNA ROSIN"] == "for" and stances["JOHN DONVAN"] == "mod"
    # the noisy title is replaced by the motion the moderator quotes
    assert "Publicist" not in convs["airport-profiling"].goals[0]


def test_one_speaker_is_one_participant_in_the_built_instances(real_build):
    """QMSum Committee's "The Chair" beside "The Chair (Hon. Anthony Rota (…))" is one participant
    (the full label) in every instance's M, and every turn of x and r names it so."""
    _, out, _ = real_build
    chairs = 0
    for inst in load_instances(out, None):
        names = [p.name for p in inst.metadata.participants]
        assert len(set(names)) == len(names), inst.id
        assert not [x for x in names if any(y != x and y.startswith(x + " (") for y in names)], (inst.id, names)
        speakers = {t.speaker for t in [*inst.history, *inst.reference]}
        assert speakers <= set(names), (inst.id, speakers - set(names))
        chairs += any(n.startswith("The Chair (Hon. Anthony Rota") for n in names)
    assert chairs > 0  # the Canadian meetings are among the instances
