"""``cocoeval check PARAMS`` says, from the params alone and before anything runs, how many of the
paper's elements the run will lack in one line; ``--paper`` lists each with the step that adds it
(``cocoeval.analysis.coverage``)."""

from __future__ import annotations

import json

import yaml

from cocoeval.cli import main

from ..conftest import TEST_KEY


def _params(tmp_path, **extra):
    data = {
        "name": "x",
        "out": "run",
        "build": {"demo_data": True},
        "setups": [{"name": "v1", "model": "openai/gpt-4.1-2025-04-14", "prompt": "vanilla", "turns_per_call": 1}],
        "judges": [{"name": "o4-mini", "model": "openai/o4-mini-2025-04-16"}],
        **extra,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_check_lists_what_of_the_paper_the_params_lack(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    path = _params(tmp_path)
    store = tmp_path / "run" / "judgments" / "human" / "ann1.jsonl"  # one annotator's store in the run directory
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({"kind": "overall"}) + "\n", encoding="utf-8")
    assert main(["check", str(path), "--paper"]) == 0  # what the paper has more of is said, not a problem
    out = capsys.readouterr().out
    assert out.index("paper coverage: ") < out.index("model(s) checked; ready")
    assert "gpt-4.1 · vanilla setups [RQ2 (§5.2), RQ5; Table 4; Figures 3, 5]: no setup with k = 5, 30" in out
    assert "gpt-5.1 · taxonomy setups" in out and "claude-opus-4 · vanilla setups" in out
    assert "SFT setups" in out and ". fine-tune with cocoeval sft-export" in out
    assert "SFT + presence penalty [§5.4, Appendix C.2]" in out
    assert "o4-mini judge" not in out  # the params have it, with both kinds
    assert "GPT-5.1 High judge" in out and "Claude Opus 4 judge" in out
    assert "human annotations, overall (1–10 scores) [Table 9 (5 annotators, 54 conversations)]: one annotator" in out
    assert "human annotations, fine-grained (turn labels)" in out
    for ds in ("iq2", "sim", "ncpc"):
        assert f"  - {ds} (" in out
    assert "  - qmsum_product (" not in out  # the shipped QMSum sample is in the demo data
    assert "ShareChat chats (human–AI)" in out and "chat:../data/sharechat#sharechat" in out


def test_check_of_a_params_file_with_the_whole_paper_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    models = {
        "gpt41": ("openai/gpt-4.1-2025-04-14", (1, 5, 30)),
        "gpt51": ("openai/gpt-5.1-chat-latest", (1, 5, 30)),
        "opus4": ("anthropic/claude-opus-4-20250514", (1, 5)),
    }
    ft = "openai/ft:gpt-4.1-2025-04-14:org:k{k}:id"
    setups = [
        {"name": f"{m}-{p}-{k}", "model": model, "prompt": p, "turns_per_call": k}
        for m, (model, ks) in models.items()
        for p in ("vanilla", "taxonomy")
        for k in ks
    ]
    setups += [{"name": f"sft-{k}", "model": ft.format(k=k), "turns_per_call": k} for k in (1, 5, 30)]
    setups += [
        {"name": "sft-pp", "model": ft.format(k=1), "prompt": "copy_then_continue", "turns_per_call": 1},
        {"name": "user", "model": "openai/gpt-4.1-2025-04-14", "kind": "human_ai"},
    ]
    judges = [
        {"name": "o4-mini", "model": "openai/o4-mini-2025-04-16"},
        {"name": "i", "model": "openai/gpt-5.1-chat-latest"},
        {"name": "h", "model": "openai/gpt-5.1-2025-11-13", "reasoning_effort": "high"},
        {"name": "c", "model": "anthropic/claude-opus-4-20250514"},
    ]
    path = _params(
        tmp_path,
        setups=setups,
        judges=judges,
        build={
            "demo_data": True,
            "sources": [
                "convokit:../data/iq2-corpus",
                "tcr:../data/tcr/SIM.json#sim",
                "tcr:../data/tcr/NCPC.json#ncpc",
                "chat:../data/sharechat#sharechat",
            ],
        },
    )
    main(["check", str(path), "--paper"])  # the sources are not fetched: check fails on them, after the coverage
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("paper coverage:") or x.startswith("  - ")]
    assert lines == [
        "paper coverage: 2 element(s) of the paper are not in this params file (the analyses that need "
        'them will say "not run"):',
        "  - human annotations, fine-grained (turn labels) [Tables 3, 10 (5 annotators, 1,080 turns of "
        "36 conversations)]: no human annotation in the run directory yet (step 1)",
        "  - human annotations, overall (1–10 scores) [Table 9 (5 annotators, 54 conversations)]: no "
        "human annotation in the run directory yet (step 1)",
    ]


def test_check_counts_what_of_the_paper_the_params_lack_in_one_line_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    path = _params(tmp_path)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("paper coverage:")]
    assert len(lines) == 1 and "  - " not in out and "steps that add them:" not in out
    assert (
        lines[0].startswith("paper coverage: ") and "element(s) of the paper are not in this params file (" in lines[0]
    )
    assert "simulators " in lines[0] and "judges " in lines[0] and "data " in lines[0]
    assert lines[0].endswith(f"cocoeval check {path} --paper lists them and the steps that add them")
    assert (
        main(["check", str(path), "--set", "llm.concurrency=3"]) == 0
    )  # the flags that made the count are in the hint
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("paper coverage:"))
    assert line.endswith(
        f"cocoeval check {path} --set=llm.concurrency=3 --paper lists them and the steps that add them"
    )
    assert out.index("paper coverage: ") < out.index("model(s) checked; ready")
