"""Paper scale: the report and the notebooks on a synthetic run of the paper's full shape.

The run: 300 instances over the six datasets (50 each) and 25 human–AI chats, 30 history + 30
reference turns of word-like text, the 16 multi-party setups of ``params/paper.yaml`` plus its two
C.2 setups (copy-then-continue with a presence penalty, base and fine-tuned: 18) and the human–AI
``gpt41-user-sim``, one judge (o4-mini) with both kinds, behaviour rates near the paper's (a few
per cent of turns, Repetition and Off topic the most frequent), 2% of continuations and judgments
invalid. Then it times, each with its peak memory (max RSS of the process tree):

- ``cocoeval report`` (target: under 8 s and 1 GB on two cores), three times: the first after
  ``cocoeval run``, whose last step keeps the run's frames (``frames.keep_frames``, timed apart:
  the synthetic run is not written by ``cocoeval run``), the report computed from them (``--repeat
  N`` times, each with the loop measured right before and the time scaled to a 0.8 s loop); the same
  report again (the kept one, copied); and with nothing kept (the run's ``cache/`` deleted: a run
  copied without it, or made by an older cocoeval), every record read;
- every notebook headless as cocoeval executes it (``cocoeval notebooks PARAMS --out DIR --only
  NAME``: papermill in cocoeval's process; ``--quick``: 02, 10 and 11 only), each under 10 s, and
  the bytes of each executed notebook (under 2 MB); 09, which writes the report, twice: with the
  report ``cocoeval report`` kept, and with none kept. Papermill's own command line is timed apart
  (its start-up: it imports jsonschema with the RFC 3987 grammar cocoeval's processes defer);
- opening the run and the first analysis call in a kernel (``open_run``, ``summary_markdown`` and
  ``ctx.analysis``: what a person waits for before a notebook's first chart; under 3 s), once the
  run's frames are kept (a first opening, which makes them where they are not kept yet, is timed
  apart);
- a viewer update in the widget's Python side (another instance, then a behaviour filter; under
  100 ms);
- ``cocoeval --help`` (under 0.5 s).

The targets are printed beside the numbers, never asserted. The first line gives this machine's
speed (a 10^7-step Python loop), the yardstick to compare numbers from different days by.

    python benchmarks/paper_scale.py [--quick] [--out DIR] [--keep] [--skip-notebooks] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cocoeval.core.jsonio import write_jsonl  # noqa: E402
from cocoeval.core.schema import (  # noqa: E402
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
from cocoeval.core.taxonomy import load_taxonomy  # noqa: E402

DATASETS = ["qmsum_product", "qmsum_academic", "qmsum_committee", "iq2", "sim", "ncpc"]
PER_DATASET = 50
CHATS = 25
TRAIN = 40
"""Train instances per multi-party dataset (the benchmark's train split, for notebook 04)."""
TURNS = 30
JUDGE = "o4-mini"
QUICK = ["02_rq2_vanilla", "10_judge_free", "11_simulators"]
RATES = {  # per-turn probability of each behaviour, near the paper's Figure 3 humans (setups scale them)
    "repetition": 0.05,
    "off_topic": 0.04,
    "redundant_information": 0.03,
    "under_answering": 0.02,
}
VOCAB = [
    *[
        "the",
        "a",
        "we",
        "i",
        "you",
        "it",
        "is",
        "to",
        "of",
        "and",
        "that",
        "this",
        "so",
        "what",
        "do",
        "think",
        "about",
        "budget",
        "design",
        "remote",
        "button",
        "price",
        "market",
        "user",
        "meeting",
        "next",
        "point",
        "yeah",
        "okay",
        "right",
        "um",
        "uh",
        "well",
        "really",
        "maybe",
        "should",
        "would",
        "could",
        "project",
        "team",
        "idea",
        "product",
        "data",
        "research",
        "committee",
        "question",
        "answer",
        "time",
        "people",
        "money",
        "plan",
        "change",
        "need",
        "want",
        "know",
        "mean",
        "like",
        "just",
        "then",
        "there",
        "here",
        "today",
        "week",
    ],
    *(f"w{i}" for i in range(3000)),
]


def _setups() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    grid = [
        ("gpt41", "openai/gpt-4.1-2025-04-14", (1, 5, 30)),
        ("gpt51", "openai/gpt-5.1-chat-latest", (1, 5, 30)),
        ("opus4", "anthropic/claude-opus-4-20250514", (1, 5)),
    ]
    for short, model, ks in grid:
        for prompt in ("vanilla", "taxonomy"):
            out += [
                {
                    "name": f"{short}-{prompt}-{k}",
                    "model": model,
                    "prompt": prompt,
                    "turns_per_call": k,
                    "datasets": DATASETS,
                }
                for k in ks
            ]
    out.append(
        {
            "name": "gpt41-copy-pp-1",
            "model": "openai/gpt-4.1-2025-04-14",
            "prompt": "copy_then_continue",
            "turns_per_call": 1,
            "n_copy": 5,
            "presence_penalty": 2.0,
            "datasets": DATASETS,
        }
    )
    out.append(
        {
            "name": "gpt41-sft-copy-pp-1",
            "model": "openai/ft:gpt-4.1-2025-04-14:org:cocoeval-k1:id",
            "prompt": "copy_then_continue",
            "turns_per_call": 1,
            "n_copy": 5,
            "presence_penalty": 2.0,
            "datasets": DATASETS,
        }
    )
    out.append(
        {
            "name": "gpt41-user-sim",
            "model": "openai/gpt-4.1-2025-04-14",
            "kind": "human_ai",
            "chatbot": "openai/gpt-4.1-2025-04-14",
            "datasets": ["sharechat"],
        }
    )
    return out


def write_paper_run(
    d: Path, seed: int = 0, *, per_dataset: int = PER_DATASET, chats: int = CHATS, turns_n: int = TURNS
) -> dict[str, int]:
    """Write the synthetic paper-shaped run into ``d`` (as ``cocoeval run`` lays it out) and a
    params file ``d/params.yaml`` whose ``out`` is ``d``; returns counts of what it wrote (smaller
    shapes for tests: ``per_dataset``, ``chats``, ``turns_n`` history and reference turns)."""
    from cocoeval.run import Run
    from tests.sim_helpers import write_run_dir

    rng = np.random.default_rng(seed)
    tax = load_taxonomy()
    zipf = 1 / np.arange(1, len(VOCAB) + 1)
    zipf /= zipf.sum()

    def text() -> str:
        words = rng.choice(VOCAB, size=int(rng.integers(2, 28)), p=zipf)
        s = " ".join(words)
        return s + ("?" if rng.random() < 0.15 else ".")

    def turns(speakers: list[str], k: int, chat: bool = False) -> list[Turn]:
        if chat:
            return [Turn(speaker=speakers[i % 2], text=text()) for i in range(k)]
        return [Turn(speaker=speakers[int(s)], text=text()) for s in rng.integers(0, len(speakers), k)]

    def instance(ds: str, c: int, split: Literal["eval", "train"] = "eval") -> Instance:
        chat = ds == "sharechat"
        speakers = ["user", "assistant"] if chat else [f"P{j}" for j in range(int(rng.integers(3, 7)))]
        return Instance(
            id=f"{ds}/{'t' if split == 'train' else 'c'}{c}/0",
            dataset=ds,
            split=split,
            kind="human_ai" if chat else "multiparty",
            metadata=Metadata(
                goals=[text() for _ in range(2)], participants=[Participant(name=s, role="member") for s in speakers]
            ),
            summary=Summary(text=text(), covers_turns=10),
            history=turns(speakers, turns_n, chat),
            reference=turns(speakers, turns_n, chat),
            provenance=Provenance(
                source_file="synthetic",
                source_format="chat" if chat else "qmsum",
                conversation_id=f"{'t' if split == 'train' else 'c'}{c}",
                start_index=10,
                seed=seed,
                builder_version="bench",
            ),
        )

    insts = [
        instance(ds, c) for ds in [*DATASETS, "sharechat"] for c in range(chats if ds == "sharechat" else per_dataset)
    ]
    setups = _setups()
    conts: dict[str, list[Continuation]] = {}
    for s in setups:
        chosen = [i for i in insts if i.dataset in s["datasets"]]  # type: ignore[operator]
        conts[str(s["name"])] = [
            Continuation(instance_id=i.id, setup_id=str(s["name"]), status="invalid", reason="bad answer")
            if rng.random() < 0.02
            else Continuation(
                instance_id=i.id,
                setup_id=str(s["name"]),
                turns=turns(sorted({t.speaker for t in i.reference}), turns_n, i.dataset == "sharechat"),
            )
            for i in chosen
        ]
    js: list[Judgment] = []
    for t, target in enumerate(["reference", *conts]):
        scale = 1.0 + 0.15 * t
        for i in insts:
            if target == "reference":
                pass
            elif not any(c.instance_id == i.id and c.status == "ok" for c in conts[target]):
                continue
            judged = [k for k in range(turns_n) if i.dataset != "sharechat" or k % 2 == 0]
            invalid = target != "reference" and rng.random() < 0.02
            labels = []
            for k in judged:
                bs = [b for b in tax.ids if rng.random() < RATES.get(b, 0.01) * scale]
                labels.append(TurnLabel(turn=k, behaviours=bs, evidence={b: "because of the words" for b in bs}))
            common = {
                "instance_id": i.id,
                "target": target,
                "target_name": target,
                "judge_id": JUDGE,
                "judge_name": JUDGE,
                "taxonomy_hash": tax.hash,
            }
            js.append(
                Judgment(
                    **common,
                    kind="fine_grained",
                    status="invalid" if invalid else "ok",
                    labels=[] if invalid else labels,
                    judged_turns=judged,
                    reason="bad" if invalid else None,
                )
            )
            js.append(
                Judgment(
                    **common,
                    kind="overall",
                    consistency=int(rng.integers(4, 11)),
                    collaborativeness=int(rng.integers(4, 11)),
                    rationale="a rationale",
                )
            )
    judges = [{"name": JUDGE, "model": "openai/o4-mini-2025-04-16", "kind": ["overall", "fine_grained"]}]
    run = Run.model_validate(
        {
            "instances": insts,
            "continuations": conts,
            "judgments": {JUDGE: js},
            "manifest": {"params": {"setups": setups, "judges": judges}},
        }
    )
    d.mkdir(parents=True, exist_ok=True)
    write_run_dir(
        d,
        run,
        {
            "status": "complete",
            "cocoeval_version": _version(),
            "params": {"name": "paper-scale", "setups": setups, "judges": judges},
            "taxonomy": {"hash": tax.hash, "name": tax.name},
        },
    )
    (d / "params.yaml").write_text(_params_yaml(d, setups, judges), encoding="utf-8")
    # the benchmark the run was drawn from: its eval split, and a train split for notebook 04's
    # SFT training set (drawn last: the run is the same with or without it)
    write_jsonl(d / "bench" / "eval.jsonl", insts)
    write_jsonl(d / "bench" / "train.jsonl", [instance(ds, c, "train") for ds in DATASETS for c in range(TRAIN)])
    return {
        "instances": len(insts),
        "setups": len(setups),
        "continuations": sum(len(v) for v in conts.values()),
        "judgments": len(js),
    }


def _version() -> str:
    import cocoeval

    return cocoeval.__version__


def _params_yaml(d: Path, setups: list[dict[str, object]], judges: list[dict[str, object]]) -> str:
    lines = [
        "name: paper-scale",
        f"out: {json.dumps(str(d))}",
        f"bench: {json.dumps(str(d / 'bench'))}",
        "setups:",
        *(f"  - {json.dumps(s)}" for s in setups),
        "judges:",
        *(f"  - {json.dumps(j)}" for j in judges),
    ]
    return "\n".join(lines) + "\n"


def timed(cmd: list[str], **kw: object) -> tuple[float, float, float, subprocess.CompletedProcess[str]]:
    """Seconds, peak memory (MB, max RSS of the command's process tree) and CPU seconds (user +
    system, the whole tree: beside the wall time, which a busy machine stretches, what the command
    itself costs) of ``cmd``."""
    probe = [
        sys.executable,
        "-c",
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "r = subprocess.run(sys.argv[1:]); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print('\\n@@', time.perf_counter() - t, u.ru_maxrss, u.ru_utime + u.ru_stime, "
        "file=sys.stderr); sys.exit(r.returncode)",
        *cmd,
    ]
    p = subprocess.run(probe, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    tail = [ln for ln in p.stderr.splitlines() if ln.startswith("@@ ")]
    s, kb, cpu = tail[-1].split()[1:] if tail else ("nan", "0", "nan")
    if p.returncode:
        print(p.stdout[-2000:], p.stderr[-4000:], sep="\n")
    return float(s), int(kb) / 1024, float(cpu), p


YARDSTICK = 0.8
"""The loop's seconds (``loop_seconds``) the report's time is also given at: wall time scaled by
the machine's speed measured right before (this VM's halves and doubles within minutes)."""


def loop_seconds() -> float:
    """Seconds of a 10^7-step Python loop in a fresh interpreter: the machine's speed now."""
    loop = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; t = time.perf_counter(); s = 0\n"
            "for i in range(10**7): s += i\nprint(time.perf_counter() - t)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(loop.stdout)


def mark(value: float, target: float) -> str:
    return "ok" if value <= target else "over"


KERNEL = """
import json, resource, sys, time
t0 = time.perf_counter()
from cocoeval.notebooks import open_run
ctx = open_run(sys.argv[1])
ctx.summary_markdown()  # a notebook's first cell
t1 = time.perf_counter()
ans = ctx.analysis("rq2")
chart = next(iter(ans.charts.values())) if ans is not None and ans.charts else None
spec = chart.to_dict() if chart is not None else None
t2 = time.perf_counter()
v = ctx.viewer()
t3 = time.perf_counter()
updates = {}
ids = [i.id for i in ctx.run.instances]
for name, act in _actions(v, ids).items():
    s = time.perf_counter(); act(); updates[name] = time.perf_counter() - s
t4 = time.perf_counter()
ans2 = ctx.analysis("judge_free")
t5 = time.perf_counter()
print(json.dumps({"open": t1 - t0, "first_analysis": t2 - t1, "viewer": t3 - t2, "updates": updates,
                  "second_analysis": t5 - t4,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def kernel_probe(params: Path) -> dict[str, object]:
    """Open the run and make the first analysis (and the viewer) in a fresh Python process, as a
    notebook kernel does (one process: the timings are the kernel's own)."""
    code = _ACTIONS + KERNEL
    p = subprocess.run([sys.executable, "-c", code, str(params)], capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        print(p.stderr[-4000:])
        return {}
    return json.loads(p.stdout.strip().splitlines()[-1])


_ACTIONS = '''
def _actions(v, ids):
    """Viewer updates through the widget's own controls (what a pick in a menu does)."""
    other = next(i for i in v.instance.options if i != v.instance.value)
    beh = v.behaviour.options[1][1]
    return {"instance change": lambda: setattr(v.instance, "value", other),
            "behaviour filter": lambda: setattr(v.behaviour, "value", beh)}
'''


def drop_kept_reports(run_dir: Path) -> None:
    """Delete the reports kept in the run's cache (its kept frames stay)."""
    for p in (run_dir / "cache").glob("report-*"):
        shutil.rmtree(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"run only the notebooks {', '.join(QUICK)}")
    ap.add_argument("--out", type=Path, help="where to write the run (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the run folder")
    ap.add_argument("--skip-notebooks", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="reuse the run already in --out (written before)")
    ap.add_argument("--skip-report", action="store_true")
    ap.add_argument(
        "--repeat", type=int, default=1, help="time the first report after the run this many times (default 1)"
    )
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="cocoeval-paper-scale-"))
    d = base / "run"
    exe = str(Path(sys.executable).parent / "cocoeval")
    # byte-compiled as an installed package is (``make bytecode``): where PYTHONDONTWRITEBYTECODE is
    # set, each process timed would otherwise compile every cocoeval module it imports again
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cocoeval")], check=True)
    print(f"this machine: {os.cpu_count()} cores, a 10^7-step Python loop in {loop_seconds():.2f} s")
    try:
        t = time.perf_counter()
        if a.reuse and (d / "manifest.json").is_file():
            counts = json.loads((base / "counts.json").read_text(encoding="utf-8"))
        else:
            counts = write_paper_run(d)
            (base / "counts.json").write_text(json.dumps(counts), encoding="utf-8")
        size = (
            sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and "cache" not in p.relative_to(d).parts[:1])
            / 1e6
        )
        print(
            f"paper-shaped run: {counts['instances']} instances ({len(DATASETS)} datasets x {PER_DATASET} + "
            f"{CHATS} chats), {counts['setups']} setups, {TURNS} + {TURNS} turns, {counts['continuations']:,} "
            f"continuations, {counts['judgments']:,} judgments ({size:.0f} MB), written in "
            f"{time.perf_counter() - t:.1f} s"
        )
        s, mb, _, _ = timed([exe, "--help"], cwd=ROOT)
        print(f"cocoeval --help: {s:.2f} s, {mb:.0f} MB (target < 0.5 s: {mark(s, 0.5)})")
        if not a.skip_report:
            # `cocoeval run` ends by keeping the run's frames (frames.keep_frames), timed here as
            # that last step of the run (the synthetic run is written without `cocoeval run`); the
            # first report after the run reads them, with the report computed; the same report again
            # is the kept one, copied. Last, a report on the run with nothing kept (its cache/
            # deleted: a run copied without it, or made by an older cocoeval) reads every record.
            shutil.rmtree(d / "cache", ignore_errors=True)
            s, mb, cpu, p = timed(
                [
                    sys.executable,
                    "-c",
                    "import sys; from cocoeval.analysis.frames import keep_frames; keep_frames(sys.argv[1])",
                    str(d),
                ],
                cwd=ROOT,
            )
            print(
                f"cocoeval run's last step, the run's frames kept: {s:.1f} s ({cpu:.1f} s of CPU), {mb:.0f} MB peak"
                f"{'' if p.returncode == 0 else f' FAILED (exit {p.returncode})'}"
            )
            first = "the first after cocoeval run (its frames kept, the report computed)"
            for which in (
                *[first] * a.repeat,
                "the same report again (kept)",
                "with nothing kept (every record read, the frames kept)",
            ):
                if which.startswith("with nothing"):
                    shutil.rmtree(d / "cache", ignore_errors=True)
                if which == first:
                    drop_kept_reports(d)
                loop = loop_seconds()  # the machine's speed right before: this VM's varies within minutes
                s, mb, cpu, p = timed([exe, "report", str(d), "--out", str(base / "report")], cwd=ROOT)
                figs = len(list((base / "report").glob("*.svg")))
                print(
                    f"cocoeval report, {which}: {s:.1f} s ({cpu:.1f} s of CPU on {os.cpu_count()} cores; "
                    f"loop {loop:.2f} s just before: {s * YARDSTICK / loop:.1f} s at a {YARDSTICK} s loop), "
                    f"{mb:.0f} MB peak, {figs} figures (target < 8 s and 1 GB: {mark(s, 8)}, {mark(mb, 1024)})"
                    f"{'' if p.returncode == 0 else f' FAILED (exit {p.returncode})'}"
                )
        k0 = kernel_probe(d / "params.yaml")  # keeps the run's frames where no opening by this code did
        if k0:
            print(
                f"kernel, a first opening (the run's frames made and kept in {d.name}/cache unless this code "
                f"kept them before): open_run + summary {k0['open']:.2f} s + first analysis (rq2) "
                f"{k0['first_analysis']:.2f} s"
            )
        k = kernel_probe(d / "params.yaml")
        if k:
            first = float(k["open"]) + float(k["first_analysis"])  # type: ignore[arg-type]
            print(
                f"kernel: open_run + summary {k['open']:.2f} s + first analysis (rq2) {k['first_analysis']:.2f} s "
                f"= {first:.2f} s before the first chart (target < 3 s: {mark(first, 3)}); a second analysis "
                f"(judge_free) {k['second_analysis']:.2f} s; viewer built in {k['viewer']:.2f} s; "
                f"peak {k['rss_mb']:.0f} MB"
            )
            for name, sec in dict(k["updates"]).items():  # type: ignore[call-overload]
                print(f"viewer update ({name}): {sec * 1000:.0f} ms (target < 100 ms: {mark(sec, 0.1)})")
        if not a.skip_notebooks:
            from cocoeval.notebooks.execute import shipped_notebooks

            nbs = sorted(shipped_notebooks().glob("*.ipynb"))
            if a.quick:
                nbs = [nb for nb in nbs if nb.stem in QUICK]
            out = base / "notebooks"
            out.mkdir(exist_ok=True)

            s, _, _, _ = timed([sys.executable, "-m", "papermill", "--help"], cwd=ROOT)
            print(
                f"papermill's own command line starts in {s:.1f} s (python -m papermill --help), what a notebook "
                "run with it takes more than the times below"
            )

            def notebook(nb: Path, which: str = "") -> None:
                target = out / nb.name
                s, mb, _, p = timed(
                    [
                        exe,
                        "notebooks",
                        str(d / "params.yaml"),
                        "--out",
                        str(out),
                        "--only",
                        nb.stem,
                        "--figures",
                        str(base / "figures"),
                    ],
                    cwd=ROOT,
                )
                kb = target.stat().st_size / 1e6 if target.exists() else float("nan")
                print(
                    f"notebook {nb.stem}{which}: {s:.1f} s, {mb:.0f} MB peak, executed notebook {kb:.2f} MB "
                    f"(targets < 10 s, < 2 MB: {mark(s, 10)}, {mark(kb, 2)})"
                    f"{'' if p.returncode == 0 else f' FAILED (exit {p.returncode})'}"
                )

            # 09 writes the report with cocoeval report's defaults: the one kept by cocoeval report, if
            explore = " (its report the one cocoeval report kept)" if any((d / "cache").glob("report-*")) else ""
            for nb in nbs:
                notebook(nb, explore if nb.stem == "09_explore" else "")
            nb09 = next((nb for nb in nbs if nb.stem == "09_explore"), None)
            if nb09 is not None:
                drop_kept_reports(d)
                notebook(nb09, " (no report kept: computed in the kernel)")
    finally:
        if a.keep or a.out:
            print(f"(kept in {base})")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
