"""What of the paper a run lacks (``cocoeval.analysis.coverage``), derived from the run's manifest
params, instances and human stores, or from a params file; and the answers that are "not run"."""

from __future__ import annotations

from cocoeval.analysis import analyses, coverage, rq, studies
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.coverage import coverage_markdown, coverage_text, paper_coverage
from cocoeval.analysis.frames import run_frames
from cocoeval.core.schema import Continuation
from cocoeval.run import ExperimentParams, Run

from ..sim_helpers import instance
from .test_rq import FT1, G41, insts, make, mp, reps
from .test_stats import fine, overall

PAPER_DATASETS = ("qmsum_product", "qmsum_academic", "qmsum_committee", "iq2", "sim", "ncpc")
O4 = {"name": "o4-mini", "model": "openai/o4-mini-2025-04-16", "kind": ["overall", "fine_grained"]}


def elements(run_or_params) -> dict[str, coverage.Missing]:
    return {m.element: m for m in paper_coverage(run_or_params)}


def run_of(setups=(), judges=(), datasets=("d",), simulated=None, judged=None, human=None) -> Run:
    """A run whose manifest has these setups and judges; ``simulated``: the setups with an ok
    continuation (default all); ``judged``: {judge: kinds with an ok judgment} (default both kinds)."""
    it = [instance(f"{ds}/c0/0", n_hist=2, n_ref=4).model_copy(update={"dataset": ds}) for ds in datasets]
    names = [s["name"] for s in setups] if simulated is None else simulated
    conts = {n: [Continuation(instance_id=it[0].id, setup_id=n, turns=it[0].reference)] for n in names}
    js = {}
    for j in judges:
        kinds = (judged or {}).get(j["name"], j.get("kind", ["overall", "fine_grained"]))
        js[j["name"]] = [
            fine(it[0].id, "reference", j["name"], [[]] * 4)
            if k == "fine_grained"
            else overall(it[0].id, "reference", j["name"], 5, 5)
            for k in kinds
        ]
    for who, kinds in (human or {}).items():
        js[f"human:{who}"] = [
            fine(it[0].id, "reference", who, [[]] * 4, human=True)
            if k == "fine_grained"
            else overall(it[0].id, "reference", f"human:{who}", 5, 5)
            for k in kinds
        ]
    return Run.model_validate(
        {
            "instances": it,
            "continuations": conts,
            "judgments": js,
            "manifest": {"params": {"setups": list(setups), "judges": list(judges)}},
        }
    )


def setup(name, model, prompt="vanilla", k=1, kind="multiparty", **extra):
    return {"name": name, "model": model, "prompt": prompt, "turns_per_call": k, "kind": kind, **extra}


def test_a_bare_run_lacks_every_element_of_the_paper():
    got = elements(run_of())
    for model in ("gpt-4.1", "gpt-5.1", "claude-opus-4"):
        for prompt in ("vanilla", "taxonomy"):
            assert f"{model} · {prompt} setups" in got
    assert got["claude-opus-4 · vanilla setups"].detail == "no setup with k = 1, 5"  # Opus: k = 1 and 5 only
    assert got["gpt-4.1 · taxonomy setups"].detail == "no setup with k = 1, 5, 30"
    sft = got["SFT setups (gpt-4.1 fine-tuned on human conversations)"]
    assert "Figure 3(g)" in sft.paper and "k = 1, 5, 30" in sft.detail
    assert "sft-export" in sft.how and "finetune" in sft.how
    assert "C.2" in got["SFT + presence penalty"].paper
    assert {
        "o4-mini judge, overall and fine-grained",
        "GPT-5.1 Instant judge",
        "GPT-5.1 High judge",
        "Claude Opus 4 judge",
    } <= set(got)
    assert "Tables 9, 10" in got["Claude Opus 4 judge"].paper
    humans = [m for m in got.values() if m.group == "human annotations"]
    assert len(humans) == 2 and all("annotate-export" in m.how and "annotate-import" in m.how for m in humans)
    for m in humans:  # B.1's draws come from the params file's annotation: section, not a run's defaults
        assert "annotate-export PARAMS" in m.how and "annotation:" in m.how and "params/paper.yaml" in m.how
        assert "annotate-export RUN" not in m.how and "the paper's draw" not in m.how
    for ds in PAPER_DATASETS:
        assert any(e.startswith(f"{ds} (") for e in got), ds
    assert "cocoeval fetch tcr" in got["sim (TCR SIM meetings)"].how
    assert "chat:../data/sharechat#sharechat" in got["ShareChat chats (human–AI)"].how


def test_the_grid_counts_a_setup_of_the_papers_model_once_it_has_continuations():
    run = run_of(
        [
            setup("v1", "openai/gpt-4.1-2025-04-14", k=1),
            setup("v5", "azure/gpt-4.1", k=5),
            setup("v30", "openai/gpt-4.1-2025-04-14", k=30),
            setup("mini", "openai/gpt-4.1-mini", k=5),
            setup("t1", FT1, "taxonomy", k=1),
            setup("g", "openai/gpt-5.1-chat-latest", k=1),
            setup("o1", "anthropic/claude-opus-4-20250514", k=1),
            setup("o5", "anthropic/claude-opus-4-5", k=5),
        ],
        simulated=["v1", "v5", "mini", "t1", "g", "o1", "o5"],
    )
    got = elements(run)
    assert got["gpt-4.1 · vanilla setups"].detail == "in the params, no ok continuation yet with k = 30"
    assert got["gpt-4.1 · vanilla setups"].how == coverage.HOW["grid"] and "params/paper.yaml" in coverage.HOW["grid"]
    assert got["gpt-4.1 · taxonomy setups"].detail == "no setup with k = 1, 5, 30"  # a fine-tuned model is not gpt-4.1
    assert got["gpt-5.1 · vanilla setups"].detail == "no setup with k = 5, 30"
    assert got["claude-opus-4 · vanilla setups"].detail == "no setup with k = 5"  # claude-opus-4-5 is another model
    every = run_of(
        [
            setup(f"{m}{p}{k}", model, p, k)
            for m, (model, ks) in {
                "g41": ("openai/gpt-4.1-2025-04-14", (1, 5, 30)),
                "g51": ("openai/gpt-5.1-chat-latest", (1, 5, 30)),
                "op": ("anthropic/claude-opus-4-20250514", (1, 5)),
            }.items()
            for p in ("vanilla", "taxonomy")
            for k in ks
        ]
    )
    assert not [
        m
        for m in paper_coverage(every)
        if m.element.endswith("· vanilla setups") or m.element.endswith("· taxonomy setups")
    ]


def test_sft_the_presence_penalty_setup_and_the_simulated_users_come_from_the_manifest():
    run = run_of(
        [
            setup("ft1", FT1, k=1),
            setup("ft5", "openai/ft:gpt-4.1-2025-04-14:org:k5:b", k=5),
            setup("pp", FT1, "copy_then_continue", k=1, presence_penalty=2.0),
            setup("user", G41, kind="human_ai"),
        ]
    )
    got = elements(run)
    assert (
        got["SFT setups (gpt-4.1 fine-tuned on human conversations)"].detail
        == "no fine-tuned (`ft:`) vanilla setup with k = 30"
    )
    assert "SFT + presence penalty" not in got
    assert not any(e.startswith("simulated users") for e in got)
    base_pp = elements(run_of([setup("pp", G41, "copy_then_continue", k=1, presence_penalty=2.0)]))
    assert "SFT + presence penalty" in base_pp  # the variant on the base model is not the paper's C.2 setup


def test_judges_need_both_kinds_and_judgments():
    got = elements(run_of(judges=[{**O4, "kind": ["fine_grained"]}]))
    assert got["o4-mini judge, overall and fine-grained"].detail == "judges fine_grained only (overall missing)"
    got = elements(run_of(judges=[O4], judged={"o4-mini": ["fine_grained"]}))
    assert got["o4-mini judge, overall and fine-grained"].detail == "in the params, no ok overall judgment yet"
    alt = [
        {"name": "i", "model": "openai/gpt-5.1-chat-latest"},
        {"name": "h", "model": "openai/gpt-5.1-2025-11-13", "reasoning_effort": "high"},
        {"name": "c", "model": "anthropic/claude-opus-4-20250514"},
    ]
    got = elements(run_of(judges=[O4, *alt]))
    assert not [m for m in got.values() if m.group == "judges"]
    got = elements(run_of(judges=[{**alt[1], "reasoning_effort": "low"}]))
    assert "GPT-5.1 High judge" in got  # gpt-5.1 at another effort is not B.2's High


def test_human_annotations_and_datasets_come_from_the_stores_and_instances():
    run = run_of(
        datasets=("qmsum_product", "iq2", "sharechat"),
        human={"ann1": ["fine_grained", "overall"], "ann2": ["fine_grained"]},
    )
    got = elements(run)
    assert "human annotations, fine-grained (turn labels)" not in got
    assert got["human annotations, overall (1–10 scores)"].detail == "one annotator; agreement needs two or more"
    data = {m.element.split(" ")[0] for m in got.values() if m.group == "data"}
    assert data == {"qmsum_academic", "qmsum_committee", "sim", "ncpc"}


def test_a_params_file_says_before_running_what_its_run_will_lack(tmp_path):
    paper = ExperimentParams.model_validate(
        {
            "name": "p",
            "build": {
                "sources": [
                    "qmsum:../data/qmsum/data",
                    "convokit:../data/iq2-corpus",
                    "tcr:../data/tcr/SIM.json#sim",
                    "tcr:../data/tcr/NCPC.json#ncpc",
                    "chat:../data/sharechat#sharechat",
                ]
            },
            "setups": [setup("v1", G41, k=1)],
            "judges": [O4],
        }
    )
    got = elements(paper)
    assert not [m for m in got.values() if m.group == "data"]  # every dataset has its source
    assert got["gpt-4.1 · vanilla setups"].detail == "no setup with k = 5, 30"  # a params file: planned is present
    assert "o4-mini judge, overall and fine-grained" not in got
    demo = elements(ExperimentParams.model_validate({"name": "d", "build": {"demo_data": True}}))
    assert {m.element.split(" ")[0] for m in demo.values() if m.group == "data"} == {"iq2", "sim", "ncpc", "ShareChat"}
    one = elements(
        ExperimentParams.model_validate(
            {
                "name": "d",
                "build": {"sources": ["qmsum:../data/qmsum/data/Product/train"]},
                "instances": {"datasets": ["qmsum_product"]},
            }
        )
    )
    assert "qmsum_product (QMSum product meetings)" not in one and "qmsum_academic (QMSum academic meetings)" in one


def test_a_benchmark_folder_gives_its_datasets(tmp_path):
    from cocoeval.core.jsonio import write_jsonl
    from cocoeval.run.stages import Experiment

    write_jsonl(
        tmp_path / "bench" / "eval.jsonl",
        [instance(f"{d}/c/0").model_copy(update={"dataset": d}) for d in PAPER_DATASETS],
    )
    exp = Experiment(ExperimentParams.model_validate({"name": "b", "bench": "bench"}), tmp_path)
    assert not [m for m in paper_coverage(exp) if m.group == "data" and m.element != "ShareChat chats (human–AI)"]
    unknown = elements(ExperimentParams.model_validate({"name": "b", "bench": "bench"}))  # no folder to read
    assert unknown["the paper's six datasets"].detail == "not known before the benchmark folder is built"


def test_the_renderers_are_a_compact_table_and_plain_lines():
    missing = paper_coverage(run_of())
    md = coverage_markdown(missing)
    assert md.startswith(f"## {coverage.TITLE}\n") and f"{len(missing)} element(s)" in md
    assert md.count("\n| ") == len(missing) + 1  # the header and one row per element
    text = coverage_text(missing, what="x.yaml")
    assert text.startswith(f"paper coverage: {len(missing)} element(s) of the paper are not in x.yaml")
    assert "`" not in text and "(step 2)" in text and "\n    2. fine-tune with cocoeval sft-export" in text
    assert md.count("cocoeval annotate-export") == 1  # a step shared by elements is written once
    assert "Every element" in coverage_markdown([]) and "has every element" in coverage_text([])


def _plain_run():
    it = insts(12)
    js = [reps(i.id, t, n) for i in it for t, n in (("reference", 1), ("t1", 2))]
    return make(it, js, mp(("t1", G41, "taxonomy", 1)))


def test_rq4_without_sft_setups_says_not_run_and_how_to_add_them():
    text = "\n".join(analyses.compute("rq4", _plain_run(), Params(judge="J", resamples=50, min_n=2)).text)
    assert text.startswith("**Not run**: this run has no SFT setups") and "sft-export" in text and "finetune" in text
    assert "None of the setups" not in text


def test_every_empty_answer_says_not_run_with_its_reason():
    run, p = _plain_run(), Params(judge="J", resamples=50, min_n=2)
    for name, why in (
        ("rq2", "no vanilla multi-party setup"),
        ("rq3", "no model has both a vanilla and a taxonomy"),
        ("rq5", "no model × prompt has multi-party setups at two"),
        ("generalization", "no human–AI setup"),
        ("agreement", "no human annotator"),
    ):
        text = "\n".join(analyses.compute(name, run, p).text)
        assert "**Not run**: " in text and why in text and "To add it:" in text, (name, text)
    f = run_frames(run)
    assert rq.human_rates(f, None, 50).text[0].startswith("**Not run**: this run has no judgments")  # type: ignore[arg-type]
    assert "**Not run**: no setup has valid judgments by K" in rq.compare_to_humans(f, "K", ["t1"], "q", 50).text[0]
    assert "**Not run**: no multi-party instance" in studies.paper_tables(f, run, "K", 50).text[0]
    assert "**Not run**: no multi-party conversation judged by K" in studies.participants(f, "K").text[0]


def test_the_report_and_the_notebooks_list_what_the_run_lacks(tmp_path):
    from cocoeval.analysis.report import write_report
    from cocoeval.notebooks.context import RunContext

    from ..sim_helpers import write_run_dir

    run = _plain_run()
    write_run_dir(tmp_path / "run", run, {"status": "complete", **run.manifest.model_dump(exclude_unset=True)})
    write_report(tmp_path / "run", tmp_path / "rep", resamples=50)
    index = (tmp_path / "rep" / "index.md").read_text()
    assert f"## {coverage.TITLE}" in index
    assert index.index(coverage.TITLE) < index.index("## Judge-free statistics")
    assert "| simulators | SFT setups (gpt-4.1 fine-tuned on human conversations) |" in index
    assert "| simulators | gpt-4.1 · taxonomy setups | RQ3" in index and "k = 5, 30" in index
    ctx = RunContext(None, tmp_path / "run", run, run_frames(run), "J")  # type: ignore[arg-type]
    summary = ctx.summary_markdown()
    assert f"### {coverage.TITLE}" in summary and "ShareChat chats" in summary


def test_the_papers_elements_are_read_from_their_data_file():
    from cocoeval.analysis.coverage import paper_elements

    el = paper_elements()
    assert set(el.datasets) == {"qmsum_product", "qmsum_academic", "qmsum_committee", "iq2", "sim", "ncpc"}
    assert (
        el.models["claude-opus-4"][2] == (1, 5) and el.sft_ks == (1, 5, 30) and el.kinds == ("overall", "fine_grained")
    )
    assert el.models["gpt-4.1"][0].match("gpt-4.1-2025-04-14") and not el.models["gpt-4.1"][0].match("gpt-4.1-mini")
    instant, high = el.judges["GPT-5.1 Instant judge"][0], el.judges["GPT-5.1 High judge"][0]
    assert instant("gpt-5.1-chat-latest", None) and not instant("gpt-5.1", "high")
    assert high("gpt-5.1-20251113", "high") and not high("gpt-5.1", "medium")


def test_the_run_facts_are_typed_and_their_kept_json_reads_back_the_same_or_not_at_all():
    run = run_of(
        setups=[setup("a", "openai/gpt-4.1"), setup("b", "openai/gpt-4.1")],
        judges=[{"name": "J", "model": "openai/o4-mini", "kind": ["overall"]}],
        datasets=("iq2", "d"),
        simulated=["b"],
        human={"ann2": ["fine_grained"], "ann1": ["fine_grained", "overall"]},
    )
    facts = coverage.RunFacts.of(run)
    assert facts.datasets == ("d", "iq2") and facts.simulated == ("b",)
    assert facts.annotators == {"fine_grained": ("ann1", "ann2"), "overall": ("ann1",)}
    assert facts.judged["J"] == ("overall",)
    kept = facts.to_json()  # the form facts.json keeps, which run_facts gives
    assert kept == coverage.run_facts(run) and kept["datasets"] == ["d", "iq2"]
    assert coverage.RunFacts.from_json(kept) == facts
    for damaged in (None, [], {**kept, "datasets": "d"}, {**kept, "more": []}, {**kept, "judged": {"J": [1]}}):
        assert coverage.RunFacts.from_json(damaged) is None
