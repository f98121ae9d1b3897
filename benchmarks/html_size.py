"""Bytes and seconds of the self-contained HTML report (``cocoeval report RUN --html``) for a
paper-sized run: 300 instances (30 history + 30 reference turns) x 18 setups (30 turns each),
every turn a real utterance of the QMSum sample shipped with cocoeval (so the text compresses as
meeting text does), one judge labelling every target (fine-grained, about one turn in six with a
behaviour and its evidence; overall scores). Prints the size of index.html, of its parts (the
Vega bundle, the per-instance conversation blocks, the rest) and the time it took.

Usage: python benchmarks/html_size.py [--instances 300] [--setups 18] [--keep DIR]"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import (
    Continuation,
    Instance,
    Judgment,
    Metadata,
    Participant,
    Provenance,
    Summary,
    Turn,
    TurnLabel,
)
from cocoeval.core.taxonomy import load_taxonomy

SPEAKERS = ["Project Manager", "Marketing", "User Interface", "Industrial Designer"]


def _utterances() -> list[str]:
    """Every utterance of the shipped QMSum sample (real meeting text)."""
    from cocoeval.sources.demo import sample_dir

    out = []
    for f in sorted(Path(sample_dir()).rglob("*.json")):
        out += [
            t["content"]
            for t in json.loads(f.read_text(encoding="utf-8")).get("meeting_transcripts", [])
            if len(t.get("content", "").split()) >= 3
        ]
    return out


UTTERANCES = _utterances()


def text(rng: random.Random, n: int = 40) -> str:
    """A real utterance (``n`` is ignored but for evidence and goals: its first ``n`` words)."""
    return " ".join(rng.choice(UTTERANCES).split()[:n])


def turns(rng: random.Random, n: int) -> list[Turn]:
    return [Turn(speaker=rng.choice(SPEAKERS), text=text(rng, 200)) for _ in range(n)]


def make_run(d: Path, n_inst: int, n_setups: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    tax = load_taxonomy()
    insts = [
        Instance(
            id=f"qmsum_product/M{k:03d}/30",
            dataset=("qmsum_product", "qmsum_academic", "qmsum_committee", "iq2", "sim", "ncpc")[k % 6],
            split="eval",
            metadata=Metadata(goals=[text(rng, 12)], participants=[Participant(name=s, role=s) for s in SPEAKERS]),
            summary=Summary(text=text(rng, 120), covers_turns=30),
            history=turns(rng, 30),
            reference=turns(rng, 30),
            provenance=Provenance(
                source_file="f.json",
                source_format="qmsum",
                conversation_id=f"M{k:03d}",
                start_index=30,
                seed=0,
                builder_version="bench",
            ),
        )
        for k in range(n_inst)
    ]
    setups = [f"setup-{k:02d}" for k in range(n_setups)]
    write_json(d / "manifest.json", {"status": "complete"})
    write_jsonl(d / "instances.jsonl", insts)
    conts = {s: [Continuation(instance_id=i.id, setup_id=s, turns=turns(rng, 30)) for i in insts] for s in setups}
    for s, cs in conts.items():
        write_jsonl(d / "continuations" / f"{s}.jsonl", cs)
    js = []
    for i in insts:
        for target in ["reference", *setups]:
            labels = []
            for t in range(30):
                bs = [rng.choice(tax.ids)] if rng.random() < 1 / 6 else []
                labels.append(TurnLabel(turn=t, behaviours=bs, evidence={b: text(rng, 12) for b in bs}))
            js.append(
                Judgment(
                    instance_id=i.id,
                    target=target,
                    target_name=target,
                    judge_id="judge",
                    judge_name="judge",
                    kind="fine_grained",
                    taxonomy_hash=tax.hash,
                    labels=labels,
                    judged_turns=list(range(30)),
                )
            )
            js.append(
                Judgment(
                    instance_id=i.id,
                    target=target,
                    target_name=target,
                    judge_id="judge",
                    judge_name="judge",
                    kind="overall",
                    taxonomy_hash=tax.hash,
                    consistency=rng.randint(3, 9),
                    collaborativeness=rng.randint(3, 9),
                )
            )
    write_jsonl(d / "judgments" / "judge.jsonl", js)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--setups", type=int, default=18)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="write the run and its report here (default: a temporary folder)")
    a = ap.parse_args()
    from cocoeval.analysis.report import write_report

    with tempfile.TemporaryDirectory() as tmp:
        base = a.keep or Path(tmp)
        t0 = time.perf_counter()
        make_run(base / "run", a.instances, a.setups)
        t1 = time.perf_counter()
        rep = write_report(base / "run", base / "report", resamples=a.resamples, html=True)
        t2 = time.perf_counter()
        page = Path(rep.html).read_text(encoding="utf-8")
        size = len(page.encode("utf-8"))
        blocks = sum(
            len(m.encode("utf-8"))
            for m in re.findall(r'<script type="[^"]*" class="cc-conv".*?</script>', page, flags=re.S)
        )
        bundle = max(len(m.encode("utf-8")) for m in re.findall(r"<script>.*?</script>", page, flags=re.S))
        print(
            f"{a.instances} instances x {a.setups} setups: index.html {size:,} bytes ({size / 2**20:.1f} MiB): "
            f"conversation blocks {blocks:,}, Vega bundle {bundle:,}, figures/tables/index {size - blocks - bundle:,}"
        )
        print(f"made the run in {t1 - t0:.1f} s; report with --html in {t2 - t1:.1f} s ({a.resamples} resamples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
