"""``Manifest.params`` typed as recorded (``cocoeval.run.recorded``): the fields are the params
models' own, the manifest's bytes do not change, and a run of an older or newer cocoeval opens and
its report runs."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from cocoeval.bench.config import BuildSection
from cocoeval.cli import main
from cocoeval.core.files import portable_record
from cocoeval.judge.config import EnsembleConfig, JudgeConfig
from cocoeval.llm.secrets import redact_urls
from cocoeval.run import Manifest, Run, load_params
from cocoeval.run import recorded as rec
from cocoeval.run.params import ExperimentParams, InstanceSelection
from cocoeval.run.rundir import write_manifest
from cocoeval.simulate.setup import ImportedSetup, PluginSetup, Setup

from ..analysis.test_rq import reps
from ..sim_helpers import instance, judged_continuations, write_run_dir

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ["demo.yaml", "paper.yaml", "paper-c2.yaml"]

SOURCES: dict[type[BaseModel], tuple[type[BaseModel], ...]] = {
    rec.RecordedSetup: (Setup, PluginSetup, ImportedSetup),
    rec.RecordedJudge: (JudgeConfig, EnsembleConfig),
    rec.RecordedBuild: (BuildSection,),
    rec.RecordedInstances: (InstanceSelection,),
    rec.RecordedParams: (ExperimentParams,),
}


@pytest.mark.parametrize("recorded", list(SOURCES), ids=lambda c: c.__name__)
def test_every_recorded_field_is_a_field_of_the_params_models_it_records(recorded):
    known = set().union(*(m.model_fields for m in SOURCES[recorded]))
    assert set(recorded.model_fields) - known == set()
    assert recorded.model_config.get("extra") == "allow"  # what it does not type is kept


def test_every_recorded_model_is_checked_and_every_field_has_a_docstring():
    made = {c for _, c in inspect.getmembers(rec, inspect.isclass) if issubclass(c, rec._Recorded)}
    assert made - {rec._Recorded} == set(SOURCES)
    tree = ast.parse(inspect.getsource(rec))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in {c.__name__ for c in SOURCES}):
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                nxt = body[i + 1] if i + 1 < len(body) else None
                documented = isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)
                assert documented, f"{cls.name}.{node.target.id} has no docstring"


def _old_bytes(manifest, params: dict[str, Any]) -> str:
    """The manifest as ``write_manifest`` wrote it when ``Manifest.params`` was the params dict."""
    data = manifest.model_dump(mode="json", exclude_unset=True)
    data["params"] = params
    return redact_urls(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True)) + "\n"


@pytest.mark.parametrize("name", PARAMS)
def test_a_manifest_written_from_the_recorded_params_has_the_bytes_it_had_from_the_params_dict(name, tmp_path):
    exp = load_params(ROOT / "params" / name)
    m = exp.manifest(status="running", started="2026-01-01T00:00:00+00:00")
    write_manifest(tmp_path, m)
    text = (tmp_path / "manifest.json").read_text(encoding="utf-8")
    assert text == _old_bytes(m, exp.params.model_dump(mode="json"))
    # read back and written again: the same bytes
    again = tmp_path / "again"
    again.mkdir()
    write_manifest(again, Manifest.model_validate_json(text))
    assert (again / "manifest.json").read_text(encoding="utf-8") == text


def test_a_manifest_with_every_kind_of_setup_and_judge_has_the_bytes_it_had_from_the_params_dict(tmp_path):
    params = yaml.safe_load((ROOT / "params" / "demo.yaml").read_text(encoding="utf-8"))
    params["build"] = {"demo_data": True}
    params["llm"] = {"cache": str(tmp_path / "cache.sqlite")}
    params["setups"] += [
        {"name": "ag", "simulator": "agents", "model": "local/smollm2", "options": {"policy": "round_robin"}},
        {"name": "mine", "continuations": "mine.jsonl", "description": "my simulator, v1", "model": "me/mine"},
    ]
    judge = params["judges"][0]
    params["judges"] += [
        {**judge, "name": "j2"},
        {"name": "ens", "ensemble": [judge["name"], "j2"], "kind": ["fine_grained"]},
    ]
    for x in [*params["setups"], *params["judges"]]:  # refused under stopping: (the rounds choose the instances)
        x.pop("max_per_dataset", None)
    params["stopping"] = {"rule": "differs"}
    (tmp_path / "mine.jsonl").write_text('{"instance_id": "x", "turns": []}\n', encoding="utf-8")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    exp = load_params(tmp_path / "p.yaml")
    m = exp.manifest(status="running")
    assert {s.source for s in m.params.setups or []} == {"simulated", "plugin", "imported"}
    assert m.params.setups[-2].options == exp.params.setups[-2].model_dump()["options"]
    assert m.params.judges[-1].ensemble == [judge["name"], "j2"] and m.params.stopping is not None
    write_manifest(tmp_path, m)
    recorded = portable_record(exp.params.model_dump(mode="json"), tmp_path)  # no absolute path (#47 item 4)
    assert recorded["llm"]["cache"] == "cache.sqlite"
    assert (tmp_path / "manifest.json").read_text(encoding="utf-8") == _old_bytes(m, recorded)


def _setup(name: str) -> dict[str, Any]:
    return {"name": name, "model": "openai/gpt-4.1", "prompt": "vanilla", "turns_per_call": 1, "kind": "multiparty"}


OLD_OR_NEW = {
    "no params": None,
    "keys this version does not know": {
        "name": "r",
        "from_the_future": {"x": [1, 2]},
        "setups": [{**_setup("a"), "new_sampling_knob": 0.5}, _setup("b")],
        "judges": [{"name": "J", "model": "openai/j", "kind": ["fine_grained"], "new_judge_knob": True}],
        "llm": {"concurrency": 3, "retired_option": "x"},
    },
    "a setup lacking keys today's setups require": {
        "name": "r",
        "setups": [{"name": "a", "kind": "multiparty"}, {"name": "b", "source": "simulated", "prompt": "vanilla"}],
    },
}


@pytest.mark.parametrize("case", list(OLD_OR_NEW))
def test_a_run_of_an_older_or_newer_cocoeval_opens_and_its_report_runs(case, tmp_path):
    js = []
    for i in range(4):
        iid = f"d/c{i}/0"
        js += [reps(iid, "reference", 1), reps(iid, "a", 2), reps(iid, "b", i % 2)]
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(4)]
    refs = {i.id: i.reference for i in insts}
    conts = {
        k: [c.model_copy(update={"turns": refs[c.instance_id]}) for c in v] for k, v in judged_continuations(js).items()
    }
    run = Run.model_validate({"instances": insts, "continuations": conts, "judgments": {"J": js}})
    params = OLD_OR_NEW[case]
    manifest: dict[str, Any] = {"status": "complete", **({"params": params} if params is not None else {})}
    write_run_dir(tmp_path / "run", run, manifest)
    text = (tmp_path / "run" / "manifest.json").read_text(encoding="utf-8")

    opened = Run.open(tmp_path / "run")
    assert [s.name for s in opened.manifest.setup_params] == ([] if params is None else ["a", "b"])
    if params is not None:  # every key kept, and written back as it was
        assert opened.manifest.params.model_dump(mode="json") == params
        out = tmp_path / "rewritten"
        out.mkdir()
        write_manifest(out, opened.manifest)
        assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == json.loads(text)

    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep"), "--resamples", "50"]) == 0
    index = (tmp_path / "rep" / "index.md").read_text(encoding="utf-8")
    assert "## Judge-free statistics" in index and "## Judge-based statistics" in index
