"""Params files written once (issue #44, point 5): ``extends:`` another params file, and ``--set
KEY=VALUE`` on the commands that read one, through the ``cocoeval`` command line; errors name the
file or the flag, the key and the fix, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from cocoeval import build
from cocoeval.bench.store import load_instances
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import load_params
from cocoeval.run.params import ExperimentParams

from ..conftest import ROOT, qmsum_meeting, write_json


def cocoeval(*args: object, code: int = 0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert out.returncode == code, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    return out


def effective(path: Path, *sets: str) -> dict:
    """The params as ``cocoeval check --print-params`` prints them."""
    return yaml.safe_load(cocoeval("check", path, "--print-params", *(x for s in sets for x in ("--set", s))).stdout)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_extending_a_chain_of_others_reads_as_them_with_its_own_keys_on_top(tmp_path):
    write(
        tmp_path / "a.yaml",
        "name: a\nbench: bench\ninstances: {split: eval, per_dataset: 3}\n"
        "llm: {concurrency: 4, rpm: 100, cache: c.sqlite}\n",
    )
    write(tmp_path / "b.yaml", "extends: a.yaml\nname: b\nllm: {rpm: 200}\n")
    child = write(tmp_path / "c.yaml", "extends: b.yaml\nname: c\nllm: {concurrency: 8}\ninstances: {datasets: [x]}\n")
    p = effective(child)
    assert p["name"] == "c" and p["bench"] == "bench"
    assert (p["llm"]["concurrency"], p["llm"]["rpm"], p["llm"]["cache"]) == (8, 200, "c.sqlite")  # merged key by key
    assert p["instances"] == {"split": "eval", "per_dataset": 3, "datasets": ["x"], "ids": None}


def test_an_extends_cycle_is_refused_naming_the_chain(tmp_path):
    write(tmp_path / "a.yaml", "extends: b.yaml\nname: a\nbench: bench\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\nname: b\n")
    err = cocoeval("check", tmp_path / "a.yaml", code=2).stderr
    assert "extends: makes a cycle" in err and "a.yaml -> " in err and "b.yaml -> " in err
    assert err.count("a.yaml") >= 2 and "how to fix" in err


def test_setups_merge_by_name_replaced_in_place_dropped_or_appended(tmp_path):
    write(
        tmp_path / "base.yaml",
        "name: base\nbench: bench\nsetups:\n"
        "  - {name: k1, model: openai/gpt-4.1, turns_per_call: 1}\n"
        "  - {name: k5, model: openai/gpt-4.1, turns_per_call: 5}\n"
        "  - {name: k30, model: openai/gpt-4.1, turns_per_call: 30}\n"
        "judges:\n  - {name: j, model: openai/o4-mini}\n",
    )
    child = write(
        tmp_path / "v.yaml",
        "extends: base.yaml\nname: v\nsetups:\n"
        "  - {name: K5, model: openai/gpt-4.1, turns_per_call: 5, temperature: 0.5}\n"  # same name: in place
        "  - {replaces: k1, name: k1-copy, model: openai/gpt-4.1, turns_per_call: 1, prompt: copy_then_continue}\n"
        "  - {drop: k30}\n"
        "  - {name: k10, model: openai/gpt-4.1, turns_per_call: 10}\n",
    )
    p = effective(child)
    assert [(s["name"], s["turns_per_call"], s["temperature"]) for s in p["setups"]] == [
        ("k1-copy", 1, None),
        ("K5", 5, 0.5),
        ("k10", 10, None),
    ]
    assert [j["name"] for j in p["judges"]] == ["j"]  # not named: kept
    bad = write(
        tmp_path / "bad.yaml", "extends: base.yaml\nsetups:\n  - {replaces: k2, name: x, model: openai/gpt-4.1}\n"
    )
    err = cocoeval("check", bad, code=2).stderr
    assert "bad.yaml" in err and "setups[0].replaces: no setup named 'k2'" in err and "k1, k5, k30" in err
    twice = write(
        tmp_path / "twice.yaml",
        "extends: base.yaml\nsetups:\n  - {name: k5, model: openai/gpt-4.1}\n"
        "  - {name: k5, model: openai/gpt-4.1, turns_per_call: 1}\n",
    )  # one file's repeat is no merge
    assert "setup names must be unique (ignoring case); repeated: k5" in cocoeval("check", twice, code=2).stderr


def test_relative_paths_are_read_from_the_folder_of_the_file_that_wrote_them(tmp_path):
    shared = tmp_path / "shared"
    for i in range(2):
        write_json(shared / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{shared / 'src'}"], shared / "bench")
    insts = load_instances(shared / "bench", "eval")
    write(
        shared / "mine.jsonl",
        "".join(
            json.dumps({"instance_id": i.id, "turns": [{"speaker": t.speaker, "text": t.text} for t in i.reference]})
            + "\n"
            for i in insts
        ),
    )
    write(
        shared / "base.yaml",
        "name: base\nbench: bench\nllm: {cache: cache.sqlite}\nsetups:\n  - {name: mine, continuations: mine.jsonl}\n",
    )
    child = write(tmp_path / "exp" / "deep" / "c.yaml", "extends: ../../shared/base.yaml\nname: c\nout: runs/c\n")
    p = effective(child)
    assert (p["bench"], p["llm"]["cache"]) == ("../../shared/bench", "../../shared/cache.sqlite")
    assert Path(p["setups"][0]["continuations"]) == (shared / "mine.jsonl").resolve()  # made absolute when loaded
    out = cocoeval("check", child).stdout  # the benchmark and the import file found where base.yaml put them
    assert "ready" in out
    out = cocoeval("estimate", child).stdout
    assert f"product: {len(insts)}" in out or str(len(insts)) in out
    # the build's sources too; this file's own out: from its own folder
    write(shared / "built.yaml", "name: built\nbuild: {sources: ['qmsum:src']}\n")
    child2 = write(tmp_path / "exp" / "b.yaml", "extends: ../shared/built.yaml\nname: b2\n")
    assert effective(child2)["build"]["sources"] == ["qmsum:../shared/src"]
    assert "fetch it first" not in cocoeval("check", child2).stderr
    cocoeval("run", child, "--no-progress", "--stage", "simulate")
    assert (tmp_path / "exp" / "deep" / "runs" / "c" / "continuations" / "mine.jsonl").is_file()


def test_the_manifest_records_the_merged_params_the_files_read_and_the_overrides(tmp_path):
    write_json(tmp_path / "src" / "product" / "M0.json", qmsum_meeting(80))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    write(tmp_path / "a.yaml", "name: a\nbench: bench\nllm: {cache: c.sqlite, concurrency: 4}\n")
    child = write(tmp_path / "b.yaml", "extends: a.yaml\nname: b\nout: runs/b\n")
    cocoeval("run", child, "--no-progress", "--set", "llm.concurrency=3", "--processes", "2")
    m = json.loads((tmp_path / "runs" / "b" / "manifest.json").read_text())
    assert m["params"]["name"] == "b" and m["params"]["bench"] == "bench"
    assert (m["params"]["llm"]["concurrency"], m["params"]["llm"]["processes"]) == (3, 2)
    assert [f["path"] for f in m["params_files"]] == ["b.yaml", "a.yaml"]  # relative to the working folder
    assert all(len(f["sha256"]) == 64 for f in m["params_files"])
    assert m["params_set"] == ["llm.concurrency=3", "llm.processes=2"]  # --processes is llm.processes
    assert m["llm_mode"]["processes"] == 2


def test_set_overrides_a_key_and_a_setup_by_name_or_by_position(tmp_path):
    p = write(
        tmp_path / "p.yaml",
        "name: p\nbench: bench\nsetups:\n"
        "  - {name: k1, model: openai/gpt-4.1, turns_per_call: 1}\n"
        "  - {name: k30, model: openai/gpt-4.1}\n",
    )
    e = effective(
        p,
        "llm.concurrency=8",
        "instances.per_dataset=2",
        "setups[k30].temperature=0.7",
        "setups.0.turns_per_call=5",
        "instances.datasets=[qmsum_product, iq2]",
    )
    assert (e["llm"]["concurrency"], e["instances"]["per_dataset"]) == (8, 2)
    assert [(s["turns_per_call"], s["temperature"]) for s in e["setups"]] == [(5, None), (30, 0.7)]
    assert e["instances"]["datasets"] == ["qmsum_product", "iq2"]
    assert yaml.safe_load(p.read_text())["setups"][0]["turns_per_call"] == 1  # the file is not touched


def test_a_bad_set_key_or_value_is_named_with_the_flag_and_the_fix(tmp_path):
    p = write(tmp_path / "p.yaml", "name: p\nbench: bench\nsetups:\n  - {name: k1, model: openai/gpt-4.1}\n")
    err = cocoeval("check", p, "--set", "llm.concurency=8", code=2).stderr
    assert "--set llm.concurency=8: llm.concurency: Extra inputs are not permitted (did you mean concurrency?)" in err
    assert "how to fix" in err
    err = cocoeval("estimate", p, "--set", "setups[k2].temperature=1", code=2).stderr
    assert "--set setups[k2].temperature=1" in err and "no item named 'k2' (names: k1)" in err
    err = cocoeval("run", p, "--set", "setups.0.turns_per_call=zero", code=2).stderr
    assert "--set setups.0.turns_per_call=zero: setups.0.turns_per_call:" in err
    err = cocoeval("check", p, "--set", "llm.concurrency", code=2).stderr
    assert "argument --set: expected KEY=VALUE" in err


def test_a_bad_key_in_an_extended_file_names_that_file_and_the_key(tmp_path):
    write(tmp_path / "base" / "a.yaml", "name: a\nbench: bench\nllm: {concurency: 4}\n")
    child = write(tmp_path / "b.yaml", "extends: base/a.yaml\nname: b\n")
    err = cocoeval("check", child, code=2).stderr
    assert f"{Path('base') / 'a.yaml'} (extended by " in err and "llm.concurency: Extra inputs" in err
    err = cocoeval("check", write(tmp_path / "m.yaml", "extends: nowhere.yaml\nname: m\n"), code=2).stderr
    assert "m.yaml: extends:" in err and "nowhere.yaml is no file" in err


OLD_PAPER_C2_SETUPS = """
  - {name: gpt41-vanilla-copy-pp-1, model: openai/gpt-4.1-2025-04-14, prompt: copy_then_continue, turns_per_call: 1, n_copy: 5, presence_penalty: 2.0}
  - {name: gpt41-vanilla-5, model: openai/gpt-4.1-2025-04-14, prompt: vanilla, turns_per_call: 5}
  - {name: gpt41-vanilla-30, model: openai/gpt-4.1-2025-04-14, prompt: vanilla, turns_per_call: 30}
  - {name: gpt41-taxonomy-copy-pp-1, model: openai/gpt-4.1-2025-04-14, prompt: taxonomy_copy_then_continue, turns_per_call: 1, n_copy: 5, presence_penalty: 2.0}
  - {name: gpt41-taxonomy-5, model: openai/gpt-4.1-2025-04-14, prompt: taxonomy, turns_per_call: 5}
  - {name: gpt41-taxonomy-30, model: openai/gpt-4.1-2025-04-14, prompt: taxonomy, turns_per_call: 30}
  - {name: gpt51-vanilla-copy-pp-1, model: openai/gpt-5.1-chat-latest, prompt: copy_then_continue, turns_per_call: 1, n_copy: 5, presence_penalty: 2.0}
  - {name: gpt51-vanilla-5, model: openai/gpt-5.1-chat-latest, prompt: vanilla, turns_per_call: 5}
  - {name: gpt51-vanilla-30, model: openai/gpt-5.1-chat-latest, prompt: vanilla, turns_per_call: 30}
  - {name: gpt51-taxonomy-copy-pp-1, model: openai/gpt-5.1-chat-latest, prompt: taxonomy_copy_then_continue, turns_per_call: 1, n_copy: 5, presence_penalty: 2.0}
  - {name: gpt51-taxonomy-5, model: openai/gpt-5.1-chat-latest, prompt: taxonomy, turns_per_call: 5}
  - {name: gpt51-taxonomy-30, model: openai/gpt-5.1-chat-latest, prompt: taxonomy, turns_per_call: 30}
  - {name: opus4-vanilla-1, model: anthropic/claude-opus-4-20250514, prompt: vanilla, turns_per_call: 1}
  - {name: opus4-vanilla-5, model: anthropic/claude-opus-4-20250514, prompt: vanilla, turns_per_call: 5}
  - {name: opus4-taxonomy-1, model: anthropic/claude-opus-4-20250514, prompt: taxonomy, turns_per_call: 1}
  - {name: opus4-taxonomy-5, model: anthropic/claude-opus-4-20250514, prompt: taxonomy, turns_per_call: 5}
  - {name: gpt41-user-sim, model: openai/gpt-4.1-2025-04-14, kind: human_ai, chatbot: openai/gpt-4.1-2025-04-14}
"""
"""The setups of params/paper-c2.yaml when it repeated paper.yaml whole (before it extended it)."""


def test_paper_c2_extending_paper_yaml_gives_the_params_and_setup_ids_of_the_explicit_file():
    new = effective(ROOT / "params" / "paper-c2.yaml")
    paper = effective(ROOT / "params" / "paper.yaml")
    old_setups = [
        s.model_dump(mode="json")
        for s in ExperimentParams.model_validate(
            {"name": "x", "bench": "b", "setups": yaml.safe_load(OLD_PAPER_C2_SETUPS)}
        ).setups
    ]
    assert new == {**paper, "name": "paper-c2", "out": "../runs/paper-c2", "setups": old_setups}
    tax = load_taxonomy(None)
    old = ExperimentParams.model_validate({**new, "setups": yaml.safe_load(OLD_PAPER_C2_SETUPS)})
    ids = {s.name: s.setup_id(tax) for s in load_params(ROOT / "params" / "paper-c2.yaml").params.setups}
    assert ids == {s.name: s.setup_id(tax) for s in old.setups} and len(ids) == 17


def test_import_continuations_adds_the_setup_to_the_extending_files_own_setups(tmp_path):
    write_json(tmp_path / "src" / "product" / "M0.json", qmsum_meeting(80))
    build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    insts = load_instances(tmp_path / "bench", "eval")
    write(
        tmp_path / "mine.jsonl",
        "".join(
            json.dumps({"instance_id": i.id, "turns": [{"speaker": t.speaker, "text": t.text} for t in i.reference]})
            + "\n"
            for i in insts
        ),
    )
    base = write(tmp_path / "base.yaml", "name: base\nbench: bench\nsetups:\n  - {name: k1, model: openai/gpt-4.1}\n")
    child = write(tmp_path / "v" / "c.yaml", "# my variant\nextends: ../base.yaml\nname: c\n")
    before = base.read_text()
    cocoeval("import-continuations", tmp_path / "mine.jsonl", child, "--setup", "mine")
    assert base.read_text() == before
    text = child.read_text()
    assert text.startswith("# my variant\nextends: ../base.yaml\n")
    assert "setups:\n  - {name: mine, continuations: ../mine.jsonl}" in text
    assert [s["name"] for s in effective(child)["setups"]] == ["k1", "mine"]
