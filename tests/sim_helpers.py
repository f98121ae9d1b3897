"""Small instances for simulation tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Instance, Judgment, Metadata, Participant, Provenance, Summary, Turn, TurnLabel
from cocoeval.core.taxonomy import load_taxonomy

SPEAKERS = ["Alice", "Bob", "Carol"]


def instance(iid: str = "d/c/0", n_hist: int = 30, n_ref: int = 30, chat: bool = False) -> Instance:
    speakers = ["user", "assistant"] if chat else SPEAKERS

    def turns(n: int, off: int) -> list[Turn]:
        return [
            Turn(speaker=speakers[(i + off) % len(speakers)], text=f"utterance {i + off} of {iid}") for i in range(n)
        ]

    return Instance(
        id=iid,
        dataset="chat" if chat else "d",
        split="eval",
        metadata=Metadata(
            goals=["Decide the budget"], participants=[Participant(name=s, role="member") for s in speakers]
        ),
        summary=Summary(text="Earlier they talked.", covers_turns=5),
        history=turns(n_hist, 0),
        reference=turns(n_ref, n_hist),
        provenance=Provenance(
            source_file="f",
            source_format="chat" if chat else "qmsum",
            conversation_id=iid.split("/")[1],
            start_index=5,
            seed=0,
            builder_version="t",
        ),
    )


def lines(n: int, start: int = 0) -> str:
    return "\n".join(f"{SPEAKERS[(i + start) % 3]}: simulated line {i + start}" for i in range(n))


def judged_continuations(judgments, conts=None):
    """Ok continuations (setup id = the judgments' target) for every judged (setup, instance) that
    ``conts`` lacks, so hand-made judgments count as judgments of the setup's current continuation."""
    from cocoeval.core.schema import Continuation

    out = {k: list(v) for k, v in (conts or {}).items()}
    have = {(k, c.instance_id) for k, v in out.items() for c in v}
    for j in judgments:
        name = j.target_name or j.target
        if j.target != "reference" and (name, j.instance_id) not in have:
            have.add((name, j.instance_id))
            out.setdefault(name, []).append(Continuation(instance_id=j.instance_id, setup_id=j.target))
    return out


def write_run_dir(d, run, manifest: dict) -> None:
    """Write ``run`` (a ``cocoeval.run.Run``) as a run directory with this manifest, as
    ``cocoeval run`` lays it out: instances, continuations per setup, judgments per judge."""
    write_json(d / "manifest.json", manifest)
    write_jsonl(d / "instances.jsonl", run.instances)
    for name, cs in run.continuations.items():
        write_jsonl(d / "continuations" / f"{name}.jsonl", cs)
    for name, js in run.all_judgments.items():
        write_jsonl(d / "judgments" / f"{name}.jsonl", js)


def with_reference_turns(run):
    """``run`` with each ok continuation that has no turns (the stand-ins ``judged_continuations``
    makes) given its instance's reference turns: cocoeval stores an ok continuation only with as
    many turns as the reference, and ``Run.open`` reads any other as invalid."""
    refs = {i.id: i.reference for i in run.instances}
    conts = {
        name: [
            c.model_copy(update={"turns": refs[c.instance_id]})
            if c.status == "ok" and not c.turns and c.instance_id in refs
            else c
            for c in cs
        ]
        for name, cs in run.continuations.items()
    }
    return run.model_copy(update={"continuations": conts})


def fake_params_file(
    tmp_path: Path, srv, setup_temp: float = 0.0, judge_temp: float = 0.0, prompt: str = "vanilla"
) -> Path:
    """A params file in ``tmp_path`` over a benchmark of four QMSum-shaped meetings (built once),
    one setup ``s`` and one judge ``j`` (both kinds), both on the fake server ``srv``."""
    from cocoeval import build

    from .conftest import qmsum_meeting
    from .conftest import write_json as write_source

    if not (tmp_path / "bench").exists():
        for i in range(4):
            write_source(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
        build([f"qmsum:{tmp_path / 'src'}"], tmp_path / "bench")
    model = f"openai-compatible/fake@{srv.openai_base}"
    p = tmp_path / "exp.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "exp",
                "out": "runs/exp",
                "bench": "bench",
                "setups": [
                    {"name": "s", "model": model, "turns_per_call": 30, "temperature": setup_temp, "prompt": prompt}
                ],
                "judges": [{"name": "j", "model": model, "temperature": judge_temp}],
                "llm": {"cache": "cache.sqlite"},
            }
        )
    )
    return p


def fine_reference(iid: str, rater: str, marks: dict[int, list[str]], turns: list[int] | range) -> Judgment:
    """A fine-grained judgment of instance ``iid``'s human reference by ``rater`` (``"J"``: the LLM
    judge; any other name, an annotator): each of ``turns`` judged and labelled with the behaviours
    ``marks`` gives it (none where it gives none)."""
    human = rater != "J"
    return Judgment(
        instance_id=iid,
        target="reference",
        target_name="reference",
        judge_id=f"human:{rater}" if human else "jid",
        judge_name=rater,
        kind="fine_grained",
        taxonomy_hash=load_taxonomy().hash,
        judged_turns=list(turns),
        labels=[TurnLabel(turn=t, behaviours=marks.get(t, [])) for t in turns],
    )
