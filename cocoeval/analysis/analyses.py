"""The analysis registry: every analysis of a run, defined once. Each is a function of a ``Run``
and ``Params`` that returns an ``Answer`` (text computed from the data, polars tables, Altair
charts), registered with ``@analysis(name, title, notebook=..., report=...)``:

- ``cocoeval report`` writes the tables and figures its ``ReportSpec`` names (``report.py``);
- ``cocoeval.notebooks.generate`` generates one notebook per ``Notebook``, showing the answers of
  the analyses registered to it (``ctx.analysis(name, ...)`` in ``cocoeval.notebooks.context``);
- ``compute(name, run, params)`` answers it anywhere else.

The answers live in ``rq`` (RQ1–RQ5), ``studies``, ``judge_free``, ``leaderboard``, ``judge_check`` and ``calibration``; the statistics in ``stats`` and ``convcompare``; the
charts in ``charts``. Adding an analysis is one function here with its ``@analysis`` entry, then
``python -m cocoeval.notebooks.generate`` (docs/extending.md, "An analysis with its notebook")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from . import agreement as _agreement
from . import answer, charts, rq, stats, studies
from . import detectability as _detectability
from . import judge_check as _judge_check
from . import leaderboard as _leaderboard
from . import paired as _paired
from .answer import Answer
from .coverage import HOW
from .frames import invalid_rates
from .judge_free import judge_free as judge_free_answer
from .registry import (
    ANALYSES,
    NOTEBOOKS,
    SECTIONS,
    Analysis,
    Notebook,
    Out,
    Params,
    ReportSpec,
    analysis,
    compute,
    get,
    in_report,
    judge_free_outputs,
    notebooks,
)
from .store import RunLike

__all__ = [
    "ANALYSES",
    "NOTEBOOKS",
    "SECTIONS",
    "Analysis",
    "Answer",
    "Notebook",
    "Out",
    "Params",
    "ReportSpec",
    "analysis",
    "compute",
    "get",
    "in_report",
    "judge_free_outputs",
    "notebooks",
]


def _judge(p: Params) -> str:
    """``p.judge`` for the judge-based statistics, which take a str; None (no judge given) is
    passed on to them unchanged."""
    return p.judge  # type: ignore[return-value]  # None passes through as before (no new check)


def _compared(
    run: RunLike,
    p: Params,
    setups: list[str],
    question: str,
    *,
    figure3: bool = True,
    absent: tuple[str, str] | None = None,
) -> Answer:
    """Each of ``setups`` against the human reference (``rq.compare_to_humans``); the notebook's
    viewer shows the same setups. None of them: "not run", ``absent`` = (why, how to add them)."""
    a = rq.compare_to_humans(
        p.frames_of(run),
        _judge(p),
        setups,
        question,
        p.resamples,
        p.seed,
        min_n=p.min_n,
        correction=p.correction,
        run=run if figure3 else None,
        absent=absent,
    )
    a.setups = setups
    return a


def _with_invalid_rates(df: pl.DataFrame, rates: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Beside every statistic of ``df`` (rows per judge and target): the share of that judge's
    judgments of ``kind`` and of the target's continuations that were invalid (``invalid_rates``)."""
    if df.is_empty():
        return df
    judged = rates.filter((pl.col("stage") == "judge") & (pl.col("kind") == kind))
    j = judged.select("judge", "target", judgments_invalid_rate="invalid_rate")
    simulated = rates.filter(pl.col("stage") == "simulate").select("target", continuations_invalid_rate="invalid_rate")
    return df.join(j, on=["judge", "target"], how="left").join(simulated, on="target", how="left")


# The report's own outputs, shown in no notebook (the notebooks show them through the answers
# below: Figure 3 in each RQ, Table 4 in "paper"). Registered first: each is the first of its section.


@analysis(
    "behaviour_means",
    "Mean occurrences of each behaviour per conversation, every judge and target",
    report=ReportSpec(
        "behaviours",
        tables={
            "behaviour_means": Out(
                "behaviour_means", "Mean occurrences per conversation, 95% bootstrap CIs (Figure 3)", empty=True
            ),
            "by_dataset": Out(
                "behaviour_means_by_dataset",
                "Mean occurrences per dataset with 95% CIs, every target (Table 11's layout: table11)",
                empty=True,
            ),
            "detections": Out("detections", "Total detections per judge/annotator, target and behaviour", empty=True),
            "detection_totals": Out(
                "detection_totals",
                "Detections per source and behaviour on the same conversations for every source, those every "
                "annotator and LLM judge labelled validly (Tables 3, 10)",
                empty=True,
            ),
        },
        figures={
            "figure3": Out(
                "figure3_behaviours", "Mean occurrences per behaviour, each setup vs the human reference ({judge})"
            ),
            "by_dataset": Out("dataset_heatmap", "Behaviours per dataset ({judge})"),
        },
    ),
)
def behaviour_means(run: RunLike, p: Params) -> Answer | None:
    """The behaviour means of every judge and target (with the invalid rates beside them), per
    dataset, the detections, and Figure 3 of the judge shown (every setup beside the human
    reference on the same instances; the means themselves where no setup was judged)."""
    f = p.frames_of(run)
    if f.counts.is_empty():
        return None
    a = Answer("How often does each target show each behaviour, per conversation?")
    means = _with_invalid_rates(stats.mean_occurrences(f, **p.boot), invalid_rates(f), "fine_grained")
    by_ds = stats.mean_occurrences(f, by=("judge", "target", "dataset"), **p.boot)
    a.tables.update(
        behaviour_means=means,
        by_dataset=by_ds,
        detections=stats.detections(f),
        detection_totals=_agreement.detection_totals(f),
    )
    fig3 = stats.figure3_means(f, p.judge, **p.boot) if p.judge else means
    if fig3.is_empty():  # no setup judged (RQ1 alone): the human references by themselves
        fig3 = means
    a.charts["figure3"] = charts.behaviour_bars(fig3, f.taxonomy, judge=p.judge)
    a.charts["by_dataset"] = charts.dataset_heatmap(by_ds, f.taxonomy, judge=p.judge)
    return a


@analysis(
    "paired_vs_human",
    "Every setup against the human reference, behaviour by behaviour, paired over instances",
    report=ReportSpec(
        "paper",
        tables={
            "per_behaviour": Out(
                "paired_vs_human",
                "Simulated minus human, per behaviour, paired over instances ({judge}); p: {test}; p_adj and "
                "verdict after the correction (verdict empty: not tested, n too small)",
                empty=True,
            ),
            "distance": Out(
                "profile_distance", "Distance D = Σ|mean_sim − mean_human| over behaviours, 95% CI", empty=True
            ),
        },
    ),
)
def paired_vs_human(run: RunLike, p: Params) -> Answer | None:
    """``stats.paired_vs_human`` of every setup for the judge shown; None without a judge."""
    f = p.frames_of(run)
    if f.counts.is_empty() or p.judge is None:
        return None
    per_b, dist = stats.paired_vs_human(f, p.judge, **p.boot, correction=p.correction)
    a = Answer("How far is each setup from the humans, behaviour by behaviour, on the same instances?")
    a.tables.update(per_behaviour=per_b, distance=dist)
    return a


@analysis(
    "likert",
    "Mean consistency and collaborativeness (1–10), every judge and target",
    report=ReportSpec(
        "agreement",
        tables={
            "likert_means": Out(
                "likert_means",
                "Mean consistency and collaborativeness, 95% bootstrap CIs, every target, each over its own valid "
                "judgments (n; unpaired: table4's layout)",
                empty=True,
            )
        },
        figures={"likert": Out("likert", "Likert scores ({judge})")},
    ),
)
def likert(run: RunLike, p: Params) -> Answer | None:
    """The Likert means of every judge and target, with the invalid rates beside them, and their chart."""
    f = p.frames_of(run)
    if f.likert.is_empty():
        return None
    lk = _with_invalid_rates(stats.likert_means(f, **p.boot), invalid_rates(f), "overall")
    a = Answer("How consistent and collaborative does each judge rate each target (1–10)?")
    a.tables["likert_means"] = lk
    a.charts["likert"] = charts.likert_chart(lk, judge=p.judge)
    return a


@analysis(
    "bench",
    "The benchmark's contents",
    notebook=Notebook(
        "00_build_benchmark",
        "Build and inspect the benchmark",
        "What does the benchmark contain? Counts per dataset, turn lengths and speakers per instance, and what the "
        "builder skipped and why.",
        run_summary=False,
    ),
)
def bench(run: RunLike, p: Params) -> Answer:
    return studies.bench_summary(run.instances, p.bench_dir or Path(run.path or ".") / "bench")


@analysis(
    "paper",
    "The paper's Figure 3 and Tables 4 and 11",
    notebook=Notebook(
        "09_explore",
        "Explore a run",
        "Browse any run: pick instances, setups, behaviours; click a bar to list the "
        "turns behind it; annotate a target yourself.",
        annotate=True,
        # the report in a folder of its own: the figures shown below (titled for the notebook) go beside
        # it, never over the report's own (titled with the judge and the validation gate)
        prelude="from cocoeval.analysis.report import write_report\n\n"
        'rep = write_report(ctx.run_dir, ctx.figures_path(figures_dir, "09_explore") / "report", judge=ctx.judge, '
        "resamples=resamples,\n                   seed=seed, min_n=min_n, correction=correction)\n"
        'display(Markdown(f"Report with {len(rep.figures)} figures and {len(rep.tables)} tables in `{rep.out}`."))',
    ),
    report=ReportSpec(
        "paper",
        other_figures="",
        tables={
            "table4": Out(
                "table4",
                "Table 4: mean consistency and collaborativeness (1–10), 95% bootstrap CIs, human "
                "reference and each multi-party setup ({judge})",
            ),
            "table11": Out(
                "table11",
                "Table 11: mean occurrences per conversation of each behaviour, per dataset (each "
                "row over its own valid judgments, n) ({judge})",
            ),
        },
    ),
)
def paper(run: RunLike, p: Params) -> Answer | None:
    if p.judge is None:
        return None
    return studies.paper_tables(p.frames_of(run), run, p.judge, p.resamples, p.seed, min_n=p.min_n)


@analysis(
    "rq1",
    "RQ1: humans",
    notebook=Notebook(
        "01_rq1_human",
        "RQ1: humans",
        "How often do humans show each inconsistent or uncollaborative behaviour in "
        "multi-party conversations? (Human–AI chat instances are left out and counted; they are the generalization "
        "notebook's subject.)",
    ),
    report=ReportSpec(
        "paper",
        other_figures="rq1_",
        tables={
            "human_means": Out(
                "rq1_human_means",
                "RQ1: the human reference over multi-party instances (human–AI chats left out) ({judge})",
            )
        },
    ),
)
def rq1(run: RunLike, p: Params) -> Answer:
    return rq.human_rates(p.frames_of(run), _judge(p), p.resamples, p.seed, min_n=p.min_n, correction=p.correction)


@analysis(
    "rq2",
    "RQ2: vanilla prompting",
    notebook=Notebook(
        "02_rq2_vanilla",
        "RQ2: vanilla prompting",
        "Do LLMs prompted plainly to continue the conversation show these "
        "behaviours as often as the humans did, on the same instances?",
    ),
)
def rq2(run: RunLike, p: Params) -> Answer:
    return _compared(
        run,
        p,
        answer.pick_setups(run, prompt="vanilla", kind="multiparty"),
        "RQ2 — Vanilla prompting vs humans",
        absent=(
            "this run has no vanilla multi-party setup",
            HOW["setup"].format(s="s", example="gpt41-vanilla-1, -5, -30, gpt51-vanilla-…, opus4-vanilla-1, -5"),
        ),
    )


@analysis(
    "rq3",
    "RQ3: taxonomy-guided prompting",
    notebook=Notebook(
        "03_rq3_prompting",
        "RQ3: taxonomy-guided prompting",
        "Does telling the simulator about the behaviours (and "
        "how often the history shows them) change them, per model and per turns per call (taxonomy − vanilla, paired "
        "per instance)? And how far is each from the humans?",
    ),
    report=ReportSpec(
        "paper",
        other_figures="",
        tables={
            "contrasts": Out(
                "rq3_contrasts",
                "RQ3: taxonomy − vanilla per model and k, paired per instance; sign-flip "
                "p, p_adj corrected over behaviours × (model, k) pairs ({judge})",
            )
        },
    ),
)
def rq3(run: RunLike, p: Params) -> Answer:
    return rq.prompting(p.frames_of(run), run, _judge(p), p.resamples, p.seed, min_n=p.min_n, correction=p.correction)


@analysis("rq3_vs_humans", "RQ3: each prompt vs the humans", notebook="03_rq3_prompting")
def rq3_vs_humans(run: RunLike, p: Params) -> Answer:
    setups = answer.pick_setups(
        run,
        kind="multiparty",
        prompt=lambda x: x in ("vanilla", "taxonomy", "copy_then_continue", "taxonomy_copy_then_continue"),
    )
    return _compared(
        run,
        p,
        setups,
        "RQ3 — Each prompt vs the humans",
        absent=(
            "this run has no vanilla, taxonomy or copy_then_continue multi-party setup",
            HOW["setup"].format(s="s", example="gpt41-vanilla-1, gpt41-taxonomy-1, …"),
        ),
    )


SFT_PRELUDE = (
    "from cocoeval.bench import load_instances\nfrom cocoeval.simulate.sft import sft_examples, training_set\n\n"
    "sft = ctx.experiment.params.sft  # the params' sft: section, drawn as cocoeval sft-export draws it\n"
    'train = load_instances(ctx.experiment.bench_dir(), "train")\n'
    "chosen, how = training_set(train, total=sft.total, datasets=sft.datasets, n_datasets=sft.n_datasets,\n"
    "                           seed=sft.seed)\n"
    "examples = {k: len(sft_examples(chosen, k, prompt=sft.prompt, seed=sft.seed)) for k in sft.ks}\n"
    "display(Markdown(f\"{len(chosen)} of {len(train)} train instances (from {', '.join(how['datasets']) or 'none'}; \"\n"
    "                 f\"the params' `sft:` section, {how['rule']}) give \"\n"
    '                 + ", ".join(f"{n} SFT examples at k = {k}" for k, n in examples.items())\n'
    '                 + (f". {how[\'shortfall\']}" if "shortfall" in how else "")\n'
    '                 + " (export: `cocoeval sft-export PARAMS.yaml --out sft/`)."))'
)
"""The RQ4 notebook's first cell: the SFT training set of the params' ``sft:`` section (1,450
instances from four datasets in the paper, A.4), chosen by ``training_set`` as ``cocoeval
sft-export PARAMS.yaml`` chooses it, and its examples per k."""


@analysis(
    "rq4",
    "RQ4: fine-tuned simulators",
    notebook=Notebook(
        "04_rq4_sft",
        "RQ4: fine-tuned simulators",
        "Do simulators fine-tuned on human continuations (exported with "
        "`cocoeval sft-export`) behave more like humans? Fine-tuned setups are those whose model is a fine-tuned id "
        "(`ft:`).",
        prelude=SFT_PRELUDE,
    ),
)
def rq4(run: RunLike, p: Params) -> Answer:
    a = _compared(
        run,
        p,
        answer.pick_setups(
            run, origin=answer.SIMULATED, model=lambda m: isinstance(m, str) and (":ft:" in m or "/ft:" in m)
        ),
        "RQ4 — Fine-tuned simulators vs humans",
        absent=("this run has no SFT setups (no setup's model is a fine-tuned `ft:` id)", HOW["sft"]),
    )
    a.setups = a.setups or None  # none fine-tuned: the viewer shows every setup
    return a


@analysis(
    "rq5",
    "RQ5: turns per call",
    notebook=Notebook(
        "05_rq5_turns_per_call",
        "RQ5: turns per call",
        "Does generating 1, 5 or 30 turns per call change the "
        "behaviours? Compared within each model × prompt, only between the k values that model has (never pooled "
        "across models or prompts).",
    ),
    report=ReportSpec(
        "paper",
        other_figures="",
        tables={
            "k_pairs": Out(
                "rq5_k_pairs",
                "RQ5: larger k − smaller k within each model × prompt, paired per instance; "
                "p_adj corrected over behaviours × k pairs ({judge})",
            ),
            "k_means": Out(
                "rq5_k_means",
                "RQ5: mean occurrences per k, with the human reference on the same "
                "instances, 95% bootstrap CIs ({judge})",
            ),
            "distance_by_k": Out(
                "rq5_distance_by_k",
                "RQ5: profile distance D to the humans per setup, by model × prompt and k (never pooled) ({judge})",
            ),
        },
    ),
)
def rq5(run: RunLike, p: Params) -> Answer:
    return rq.by_turns_per_call(
        p.frames_of(run), run, _judge(p), p.resamples, p.seed, min_n=p.min_n, correction=p.correction
    )


@analysis(
    "generalization",
    "Human–AI generalization",
    notebook=Notebook(
        "06_generalization",
        "Human–AI generalization",
        "When an LLM simulates the *user* of a chatbot (one turn per "
        "call), are its user turns as inconsistent/uncollaborative as real users'? Only user turns are judged.",
    ),
)
def generalization(run: RunLike, p: Params) -> Answer:
    a = _compared(
        run,
        p,
        answer.pick_setups(run, kind="human_ai"),
        "Simulated users vs real users",
        figure3=False,
        absent=("this run has no human–AI setup (`kind: human_ai`)", HOW["user_sim"]),
    )
    a.setups = a.setups or None
    return a


@analysis(
    "participants",
    "Participants (D.4, Table 12)",
    notebook=Notebook(
        "07_participants",
        "Participants (D.4, Table 12)",
        "Do behaviour counts change with the number of "
        "participants, in human conversations and in every simulator setup? Per dataset, by default on the two "
        "datasets whose participant counts vary most, as the paper does.",
        params=(
            'participants_datasets: str = ""  # comma-separated datasets; empty: the participants_top datasets whose '
            "participant counts vary most",
            "participants_top: int = 2  # how many datasets when none are named (the paper's Table 12 uses two)",
            'participants_count: str = "conversation"  # "conversation": participants listed in M; "window": distinct '
            "speakers in x + r",
        ),
    ),
    report=ReportSpec(
        "paper",
        other_figures="",
        tables={
            "spearman": Out(
                "participants",
                "Table 12 (D.4): Spearman between participants and behaviour counts, human "
                "reference and every setup, per dataset ({judge})",
            ),
            "table12": Out("table12", "Table 12 (D.4): Spearman ρ, behaviours × targets, per dataset ({judge})"),
            "participant_variance": Out(
                "participant_variance",
                "Participants per dataset: variance and range (the two largest are Table 12's default) ({judge})",
            ),
        },
    ),
)
def participants(run: RunLike, p: Params) -> Answer:
    """Options (the notebook's parameters): ``participants_datasets`` (comma-separated; empty: the
    ``participants_top`` datasets whose participant counts vary most), ``participants_count``."""
    o = p.options
    kw: dict[str, Any] = {}
    if "participants_datasets" in o:
        kw["datasets"] = [x.strip() for x in str(o["participants_datasets"]).split(",") if x.strip()] or None
    if "participants_top" in o:
        kw["top"] = int(o["participants_top"])
    if "participants_count" in o:
        kw["count"] = str(o["participants_count"])
    return studies.participants(p.frames_of(run), _judge(p), run, **kw, min_n=p.min_n, correction=p.correction)


@analysis(
    "agreement",
    "Judge–human agreement",
    notebook=Notebook(
        "08_agreement",
        "Judge–human agreement",
        "Do the LLM judges agree with human annotators (leave-one-out "
        "Spearman, one-sided bootstrap)? Add human labels with the annotator below or with `cocoeval annotate-export` "
        "/ `annotate-import`.",
        annotate=True,
    ),
    report=ReportSpec(
        "agreement",
        tables={
            "agreement": Out(
                "agreement",
                f"Agreement, inter-human and each judge vs the annotators (Tables 3, 9, 10; {_agreement.PROCEDURE})",
            ),
            "taxonomy_coverage": Out(
                "taxonomy_coverage",
                "Turns annotators marked with a behaviour not in the taxonomy, per annotator (Appendix B.3)",
            ),
        },
        figures={
            "agreement": Out(
                "agreement", "Average leave-one-out Spearman: inter-human and each judge vs the annotators"
            )
        },
    ),
)
def agreement(run: RunLike, p: Params) -> Answer:
    return studies.agreement_answer(p.frames_of(run), p.resamples, p.seed, min_n=p.min_n)


@analysis(
    "judge_free",
    "Judge-free statistics",
    notebook=Notebook(
        "10_judge_free",
        "Judge-free statistics",
        "Measured on the turns themselves, with no model and no judge: how "
        "long are the turns, how evenly do the participants speak, how often does the speaker change, how much is "
        "repeated, how varied is the wording, are questions asked and answered, how many turns are backchannels, how "
        "close is the talk to the goals? The human reference against every setup, paired over instances; and a sanity "
        "check of each judge against the closest statistic; and, beyond the paper, whether a classifier can tell each "
        "setup's continuations from the humans' (its AUC, beside the humans against themselves). Definitions: "
        "`cocoeval/analysis/convstats.py`, `cocoeval/analysis/detectability.py` and docs/analysis.md.",
        viewer="plain",
    ),
    report=ReportSpec(
        "judge-free",
        tables={
            "per_conversation": Out(
                "convstats", "Judge-free statistics per conversation (target x instance; – = undefined)", empty=True
            ),
            "means": Out(
                "convstats_means",
                "Judge-free statistics: mean per target over the conversations where "
                "defined, 95% bootstrap CIs over instances (undefined: conversations left "
                "out)",
                empty=True,
            ),
            "vs_human": Out(
                "convstats_vs_human",
                "Judge-free statistics, setup minus human reference, paired over "
                "instances; p: {test} (the family: statistics × setups); verdict "
                "empty: not tested, n too small",
            ),
            "turn_taking": Out(
                "turn_taking",
                "Turn-taking realism per setup: speaker-transition distance to the human "
                "reference of the same instance (total variation, 0–1) and speaker entropy "
                "minus the humans' (bits), mean over instances, 95% bootstrap CIs; the "
                "yardstick: the humans' own last turns of x against r",
            ),
            "judge_sanity": Out(
                "judge_sanity",
                "Judge sanity: Spearman between each judge's per-conversation counts and "
                "the closest judge-free statistic, 95% bootstrap CI over conversations "
                "(descriptive; a judge answering at random gives ρ ≈ 0)",
                empty=True,
                judge_based=True,
            ),
        },
        figures={
            "judge_free": Out("convstats", "Judge-free statistics per target, 95% CIs (human reference in black)"),
            "judge_free_vs_human": Out(
                "convstats_vs_human",
                "Judge-free statistics, setup minus human reference with 95% CIs, coloured by the corrected verdict",
            ),
            "turn_taking": Out(
                "turn_taking",
                "Turn-taking realism per setup against the humans of the same instances, "
                "95% CIs (the yardstick: the humans' own earlier turns)",
            ),
        },
    ),
)
def judge_free(run: RunLike, p: Params) -> Answer:
    return judge_free_answer(run, p.frames_of(run), p.resamples, p.seed, min_n=p.min_n, correction=p.correction)


@analysis(
    "detectability",
    "A human-likeness test without a judge (beyond the paper)",
    notebook="10_judge_free",
    report=ReportSpec(
        "judge-free",
        tables={
            "detectability": Out(
                "detectability",
                "Beyond the paper: can a classifier tell each setup's continuations from the human references of the "
                "same instances? AUC of a ridge classifier on TF-IDF words, out of fold (folds by source "
                "conversation; 0.5 = indistinguishable by it, a lower bound), 95% cluster-bootstrap interval widened "
                "for the refitted models, permutation p for AUC > 0.5; the floor (humans vs humans) first; no AUC "
                "below the sizes ci_note names",
                empty=True,
            )
        },
        figures={
            "detectability": Out(
                "detectability",
                "Beyond the paper: AUC of a classifier telling each setup from the humans, 95% intervals, the floor "
                "(humans vs humans) as a grey band, 0.5 (indistinguishable) in red",
            )
        },
    ),
)
def detectability(run: RunLike, p: Params) -> Answer:
    return _detectability.answer(run, p.resamples, p.seed, min_n=p.min_n)


@analysis(
    "turn_taking_measured",
    "Turn-taking as a measured object (beyond the paper)",
    notebook="10_judge_free",
    report=ReportSpec(
        "judge-free",
        tables={
            "next_speaker": Out(
                "next_speaker",
                "Beyond the paper: next-speaker accuracy against the human reference — each model-free rule "
                "teacher-forced (given the true conversation so far), each setup free-running (its own continuation, "
                "position by position, not teacher-forced); 95% bootstrap CIs resampling source conversations",
            ),
            "run_lengths": Out(
                "run_lengths",
                "Beyond the paper: run lengths (consecutive turns by one speaker) per target — mean with a 95% "
                "bootstrap CI resampling source conversations, share of runs of 1, 2, 3 and 4+ turns, longest",
            ),
            "run_lengths_per_speaker": Out(
                "run_lengths_per_speaker",
                "Beyond the paper: run lengths per participant (by name) and target, beside the same participant's "
                "mean run in the reference of the same instances",
            ),
            "self_selection": Out(
                "self_selection",
                "Beyond the paper: self-selection setups — passes, malformed answers (counted, never read as a "
                "pass) and turns where every agent passed",
            ),
            "speaker_fidelity": Out(
                "speaker_fidelity",
                "Beyond the paper: per-speaker fidelity — each participant's per-turn behaviour rates in the "
                "reference against the same participant in each setup, per judge (RMS over behaviours, unbiased "
                "across source conversations, re-centred conversation-bootstrap 95% CI); unscored rows say why",
                judge_based=True,
            ),
        },
        figures={
            "next_speaker": Out(
                "next_speaker",
                "Beyond the paper: next-speaker accuracy, teacher-forced rules and free-running setups, 95% CIs",
            ),
            "run_lengths": Out("run_lengths", "Beyond the paper: run lengths per target, shares of runs by length"),
        },
    ),
)
def turn_taking_measured(run: RunLike, p: Params) -> Answer:
    """Next-speaker accuracy, run lengths, per-speaker fidelity (``turntaking``)."""
    from .frames import judges_of
    from .turntaking import turn_taking_answer

    f = p.frames_of(run)
    judges = [p.judge] if p.judge is not None else judges_of(f)
    return turn_taking_answer(run, f, judges, resamples=p.resamples, seed=p.seed, min_n=p.min_n)


@analysis(
    "leaderboard",
    "A leaderboard of simulators",
    notebook=Notebook(
        "11_simulators",
        "A leaderboard of simulators",
        "Which simulator behaves most like the humans on the same "
        "instances? Every setup of the run (simulated, imported, plugin) ranked, per judge, by the distance of its "
        "behaviour profile from the humans' (the root mean square of the per-behaviour paired differences in mean "
        "occurrences per conversation, estimated without the upward bias of squared noise), beside the floor (the same "
        "distance between two random halves of the human references: 0 on average, with the range chance gives), the "
        "Likert gap and the judge-free turn-taking distances. Definitions: "
        "`cocoeval/analysis/leaderboard.py` and docs/analysis.md. Beyond the paper: each rank's interval (the ranks "
        "the data support) and every pair of setups compared on the instances both have, clustered by source "
        "conversation (`cocoeval/analysis/paired.py`). Then every setup against the humans behaviour by "
        "behaviour, as RQ2 compares the vanilla ones.",
        params=(
            'paired_correction: str = "holm"  # the correction over the behaviours of each pair of setups: holm '
            "(family-wise error) or bh (false discovery rate)",
        ),
    ),
    report=ReportSpec(
        "leaderboard",
        tables={
            "leaderboard": Out(
                "leaderboard",
                "Leaderboard of simulators, per judge (never ranked across judges): the "
                "distance to the humans on the same instances (RMS of the per-behaviour "
                "paired differences, unbiased for its square; D = their absolute sum), 95% "
                "bootstrap CIs, the floor (two halves of the human references) first; Likert gaps and turn-taking "
                "beside; continuations ok and judgments valid of all",
            ),
            "behaviours": Out(
                "leaderboard_behaviours",
                "Leaderboard: per judge, setup and behaviour, the paired difference "
                "in mean occurrences per conversation (setup − human), 95% CIs",
            ),
            "stopping": Out(
                "leaderboard_stopping",
                "Where each setup stopped and why, for a run with a stopping: section (beyond the paper): status, "
                "round, conversations and instances used of those planned, the rule's reason and method",
            ),
        },
        figures={
            "leaderboard": Out(
                "leaderboard",
                "Leaderboard of simulators: distance to the humans per setup with "
                "95% CIs, one panel per judge, the floor as a grey band",
            )
        },
    ),
)
def leaderboard(run: RunLike, p: Params) -> Answer:
    return _leaderboard.answer(run, p.frames_of(run), p.resamples, p.seed, min_n=p.min_n)


@analysis(
    "paired",
    "Setup against setup: paired comparisons and rank intervals (beyond the paper)",
    notebook="11_simulators",
    report=ReportSpec(
        "leaderboard",
        tables={
            "paired": Out(
                "paired",
                "Beyond the paper: every pair of setups per judge, a − b on the instances both have (per behaviour: "
                "mean occurrences per conversation; distance: distance to the humans on the instances the two and the "
                "humans share), 95% bootstrap CIs resampling source conversations, sign-flip tests of the "
                "per-conversation sums corrected over the behaviours of each pair (the correction column names it); "
                "the distance rows: the difference of the squares studentized by its resamples, Holm over the pairs",
            ),
            "rank_intervals": Out(
                "rank_intervals",
                "Beyond the paper: rank intervals per judge (simultaneous pairwise distance tests, Holm over all "
                "pairs; Mogstad, Romano, Shaikh & Wilhelm 2024): every true rank inside its interval at once with "
                "95% confidence; settled = one rank",
            ),
        },
        figures={
            "paired": Out(
                "paired",
                "Beyond the paper: setup × setup, the difference in distance to the humans (row − column) coloured "
                "by the corrected verdict, with the number of behaviours that differ",
            )
        },
    ),
)
def paired(run: RunLike, p: Params) -> Answer:
    """Every pair of setups compared on the instances both have, clustered by source conversation
    (``paired.answer``); Holm over the behaviours of a pair unless the notebook's
    ``paired_correction`` says bh."""
    return _paired.run_answer(
        run,
        p.frames_of(run),
        resamples=p.resamples,
        seed=p.seed,
        min_n=p.min_n,
        correction=str(p.options.get("paired_correction", "holm")),
    )


@analysis("simulators_vs_humans", "Every setup vs the humans", notebook="11_simulators")
def simulators_vs_humans(run: RunLike, p: Params) -> Answer:
    """Every setup of the run (simulated, imported, plugin; multi-party and human–AI) against the
    human reference on the same instances, as RQ2 compares the vanilla ones."""
    return _compared(
        run,
        p,
        answer.pick_setups(run),
        "Every setup vs the humans",
        absent=(
            "this run has no setup",
            HOW["setup"].format(s="s", example="gpt41-vanilla-30, or a setup of imported continuations"),
        ),
    )


@analysis(
    "judge_check",
    "A judge you can check",
    notebook=Notebook(
        "12_judge_check",
        "A judge you can check (beyond the paper)",
        "Can the judge be trusted, behaviour by behaviour? "
        "Turn-level agreement with the annotators (Krippendorff's α, Cohen's κ, precision, recall and F1 against their "
        "majority, with bootstrap intervals and the positive turns each rests on), the validation gate every behaviour "
        "rate of the workbench is marked with, behaviour rates corrected with the human labels of a random draw "
        "(power-tuned prediction-powered inference, PPI++), and the probes of `cocoeval probe` (names, planted behaviours, stability, "
        "self-preference). None of this is in the paper. Definitions: `cocoeval/analysis/judge_check.py`, "
        "docs/judging.md (Validating a judge).",
        annotate=True,
    ),
    report=ReportSpec(
        "agreement",
        tables={
            "validation": Out(
                "judge_validation",
                "Beyond the paper: the validation gate per judge and behaviour (a "
                "one-sided permutation test of ρ, Holm over the behaviours tested, on at "
                "least 30 annotated conversations and 11 positive turns), with the "
                "judge id and each behaviour's status",
            ),
            "turn_agreement": Out(
                "turn_agreement",
                "Beyond the paper: turn-level agreement per behaviour (α among the "
                "annotators and with the judge, κ, precision/recall/F1 against the "
                "majority), 95% bootstrap CIs over conversations",
            ),
            "likert_agreement": Out("likert_agreement", "Beyond the paper: ordinal α of the Likert scores, 95% CIs"),
            "corrected_rates": Out(
                "corrected_rates",
                "Beyond the paper: mean occurrences per conversation corrected with "
                "the human labels (power-tuned prediction-powered, PPI++, 95% CIs "
                "from 40 labelled conversations) beside the judge-only and the "
                "humans-only estimates, shown clipped at 0 (raw in corrected_raw); "
                "assumes the annotated conversations are a random draw",
            ),
            "probe_names": Out(
                "probe_names",
                "Beyond the paper: names probe (labels and Likert points that change when participants are renamed)",
            ),
            "probe_planted": Out(
                "probe_planted",
                "Beyond the paper: planted behaviours, detection rate per behaviour "
                "with 95% CIs, and false alarms added",
            ),
            "probe_stability": Out(
                "probe_stability", "Beyond the paper: stability, turn-level κ between two samples of the same judgments"
            ),
            "probe_self_preference": Out(
                "probe_self_preference",
                "Beyond the paper: self-preference, the gap when the judge's model family is the simulator's",
            ),
        },
    ),
)
def judge_check(run: RunLike, p: Params) -> Answer:
    from .judge_check_prose import JudgeProbes
    from .probes import probe_findings, probe_tables

    f = p.frames_of(run)
    judges = [p.judge] if p.judge is not None else _judge_check.llm_judges(f)
    parts: dict[str, list[Any]] = {}
    found: list[JudgeProbes] = []
    for j in judges:
        t = probe_tables(run, j, resamples=p.resamples, seed=p.seed)
        found.append(JudgeProbes(j if len(judges) > 1 else None, probe_findings(t)))
        for k, v in t.items():
            parts.setdefault(k, []).append(v if "judge" in v.columns else v.with_columns(judge=pl.lit(j)))
    tables = {k: pl.concat(v, how="diagonal_relaxed") for k, v in parts.items()}
    return _judge_check.answer(run, f, p.judge, p.resamples, p.seed, min_n=p.min_n, probes=tables, probe_findings=found)


@analysis(
    "judge_reliability",
    "A judge's reliability, tracked (beyond the paper)",
    notebook="12_judge_check",
    report=ReportSpec(
        "agreement",
        tables={
            "calibration": Out(
                "judge_calibration",
                "Beyond the paper: calibration of the judge's vote fractions (samples: k) against the annotators' "
                "majority per behaviour and pooled: expected calibration error (10 bins) and Brier score",
            ),
            "reliability_bins": Out("reliability_bins", "Beyond the paper: the reliability diagram's bins"),
            "judge_samples": Out(
                "judge_samples",
                "Beyond the paper: a judge's samples (samples: k), the invalid ones counted with their reasons",
            ),
            "judge_votes": Out(
                "judge_votes",
                "Beyond the paper: per judged turn and behaviour, the share of the judge's valid samples that label it",
            ),
            "judge_history": Out(
                "judge_history",
                "Beyond the paper: agreement (α, κ, F1) and calibration against the latest entry of the same judge "
                "name under another judge id in judge_history.jsonl beside the run: the change with its 95% paired "
                "bootstrap interval over conversations, rose or fell when it excludes 0, else no clear change",
            ),
        },
        figures={
            "reliability": Out(
                "reliability",
                "Beyond the paper: reliability diagram, the judge's vote fraction against the annotators' majority",
            )
        },
    ),
)
def judge_reliability(run: RunLike, p: Params) -> Answer:
    from .calibration import answer as reliability_answer

    return reliability_answer(
        run,
        p.frames_of(run),
        p.judge,
        p.resamples,
        p.seed,
        min_n=p.min_n,
        history_folder=p.options.get("judge_history"),
        record=bool(p.options.get("record_history", True)),
    )


@analysis(
    "compare_runs",
    "Comparing runs (beyond the paper)",
    notebook=Notebook(
        "13_compare_runs",
        "Comparing runs (beyond the paper)",
        "Is a simulator of this run different from one of another run (the same simulator last month, another "
        "lab's)? Every setup of this run and of the runs in `compare_with`, labelled RUNLABEL/setup, compared pair by "
        "pair on the instances every run has with the same content, under one judge id, as `cocoeval compare` "
        "does: per behaviour and in the distance to the humans, 95% intervals clustered by source conversation, "
        "sign-flip tests corrected over the behaviours of each pair, and rank intervals. With `compare_with` empty "
        "the run is compared with itself: nothing may differ. None of this is in the paper. Definitions: "
        "`cocoeval/analysis/runcompare.py`, `cocoeval/analysis/paired.py` and docs/analysis.md (Comparing runs).",
        params=(
            'compare_with: str = ""  # run directories to compare this run with, comma-separated (relative to this '
            "notebook); empty: the run with itself",
            'compare_setups: str = ""  # only these setups, comma-separated (a setup name, or RUNLABEL/setup); '
            "empty: every setup",
        ),
        viewer="plain",
    ),
)
def compare_runs(run: RunLike, p: Params) -> Answer:
    from .runcompare_view import notebook_answer

    split = [x.strip() for x in str(p.options.get("compare_with") or "").split(",") if x.strip()]
    setups = [x.strip() for x in str(p.options.get("compare_setups") or "").split(",") if x.strip()]
    return notebook_answer(
        run,
        others=split,
        judge=p.judge,
        setups=setups or None,
        resamples=p.resamples,
        seed=p.seed,
        correction=p.correction,
        min_n=p.min_n,
    )
