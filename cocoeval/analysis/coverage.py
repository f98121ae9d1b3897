"""What of the paper a run (or a params file, before it runs) does not contain: ``paper_coverage``
lists each of the paper's elements that is absent (the simulator setups of its grid, the SFT
setups, the C.2 presence-penalty setup, the D.1 simulated users, the o4-mini judge and the
alternative judges of B.2, human annotations, the six datasets and the ShareChat chats), each
with what it is, where the paper shows it and the step that adds it. Everything is derived from
the run's manifest params, its instances and its human annotation stores (or from the params, the
benchmark folder and the run directory's annotation stores), never assumed.

``coverage_markdown`` (the report's index, collapsed in its HTML page, and every notebook's run
summary), ``coverage_summary`` (``cocoeval check``: one line) and ``coverage_text`` (``cocoeval
check --paper``) render the list; ``not_run`` is the one wording of an answer that has nothing
to answer from. Light on purpose: no polars, so ``cocoeval check`` stays fast."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cocoeval.run import Experiment, ExperimentParams

    from .store import RunLike

__all__ = [
    "HOW",
    "Missing",
    "RunFacts",
    "coverage_markdown",
    "coverage_summary",
    "coverage_text",
    "not_run",
    "paper_coverage",
]

TITLE = "What this run does not contain of the paper"


@dataclass(frozen=True)
class Missing:
    """One element of the paper this run lacks."""

    group: str
    """simulators, judges, human annotations or data."""
    element: str
    """What it is (e.g. "gpt-4.1 · vanilla setups")."""
    paper: str
    """Where the paper shows it (tables, figures, sections)."""
    detail: str
    """What exactly is missing (e.g. "no setup with k = 1, 30")."""
    how: str
    """The step that adds it."""


HOW = {
    "setup": "add the setup{s} to `setups:` (params/paper.yaml lists them: {example}), then `cocoeval run PARAMS`",
    "grid": "add the missing k values of the model × prompt to `setups:` (params/paper.yaml has the paper's grid: "
    "gpt41-*, gpt51-*, opus4-*), then `cocoeval run PARAMS`",
    "sft": "fine-tune with `cocoeval sft-export PARAMS --out sft/` + `cocoeval finetune sft/sft_k<K>.jsonl --model "
    "gpt-4.1-2025-04-14 --n-epochs 1`, then add the setups with the printed `openai/ft:…` ids (params/paper.yaml: "
    "gpt41-sft-1, -5, -30) and `cocoeval run PARAMS`",
    "sft_pp": 'fine-tune (k = 1) as for the SFT setups, then add `{model: "openai/ft:…", prompt: copy_then_continue, '
    "turns_per_call: 1, n_copy: 5, presence_penalty: 2.0}` (params/paper.yaml: gpt41-sft-copy-pp-1) and "
    "`cocoeval run PARAMS`",
    "user_sim": "add `{model: openai/gpt-4.1-2025-04-14, kind: human_ai, chatbot: openai/gpt-4.1-2025-04-14}` "
    "(params/paper.yaml: gpt41-user-sim) with the ShareChat chats in the benchmark, then `cocoeval run PARAMS`",
    "o4-mini": "add `{name: o4-mini, model: openai/o4-mini-2025-04-16, kind: [overall, fine_grained], "
    "reasoning_effort: medium}` to `judges:` (params/paper.yaml), then `cocoeval run PARAMS --stage judge`",
    "alt_judge": "uncomment the judge under `judges:` in params/paper.yaml (gpt51-instant, gpt51-high, opus4; both "
    "kinds), then `cocoeval run PARAMS --stage judge`",
    "judge": "add a judge with `kind: [overall, fine_grained]` to `judges:` (the paper's: o4-mini, params/paper.yaml), "
    "then `cocoeval run PARAMS --stage judge`",
    "humans": "`cocoeval annotate-export PARAMS --out annotate/` (B.1's draws are the params file's `annotation:` "
    "section, as in params/paper.yaml; given a run directory instead, it draws from every setup of the run), "
    "have the annotators label it, then `cocoeval annotate-import FILE RUN --key annotate/key.json` (or the "
    "annotator of notebooks 08, 09)",
    "fetch": "`cocoeval fetch {fetch} --out data/`, `{source}` under `build.sources` (params/paper.yaml), then "
    "`cocoeval run PARAMS` (it rebuilds the benchmark)",
    "sharechat": "no public archive to fetch: put the ShareChat user/assistant logs (JSON/JSONL) in data/sharechat/ and "
    "add source `chat:../data/sharechat#sharechat` under `build.sources` (params/paper.yaml), then "
    "`cocoeval run PARAMS`",
}
"""The steps that add a missing element (also quoted by the answers that are not run)."""


def not_run(why: str, how: str) -> str:
    """The one wording of an answer with nothing to answer from: why, and the step that adds it."""
    return f"**Not run**: {why}. To add it: {how}."


# ----------------------------------------------------------------------------- the paper's elements
def _base(model: str) -> str:
    """The model name without its provider (``openai/gpt-4.1`` → ``gpt-4.1``; an Azure deployment
    is named after its model)."""
    return model.split("/", 1)[-1].lower()


_DATE = r"(?:-\d{4}-\d{2}-\d{2}|-\d{8})?"
ELEMENTS_FILE = Path(__file__).with_name("paper_elements.yaml")
"""The paper's elements coverage looks for (models, prompts, judges, datasets, annotations): data,
not code, so that a reader sees the whole list in one place."""


@dataclass(frozen=True)
class PaperElements:
    """``paper_elements.yaml`` as coverage uses it."""

    models: dict[str, tuple[re.Pattern[str], str, tuple[int, ...]]]
    """{the paper's simulator: (pattern of its model name, where the paper shows it, its k values)}."""
    prompts: dict[str, str]
    """{prompt of the grid: the research questions that use it}."""
    sft_ks: tuple[int, ...]
    """The k values of RQ4's fine-tuned setups."""
    user_simulator: re.Pattern[str]
    """The model pattern of D.1's simulated users."""
    judges: dict[str, tuple[Callable[[str, str | None], bool], str]]
    """{B.2's alternative judge: (test on the model name and reasoning effort, its name in params/paper.yaml)}."""
    kinds: tuple[str, ...]
    """The judge's kinds."""
    datasets: dict[str, tuple[str, str, str]]
    """{the paper's dataset: (what it is, its ``cocoeval fetch`` name, its build source)}."""
    sharechat: str
    """The dataset of the generalization study's human–AI chats."""
    demo_datasets: tuple[str, ...]
    """The datasets the offline demo builds."""
    human_annotations: dict[str, tuple[str, str]]
    """{judge kind: (where the paper shows its human annotations, what they are)}."""


def _judge_test(pattern: re.Pattern[str], effort: str | None) -> Callable[[str, str | None], bool]:
    return lambda m, e: bool(pattern.match(m)) and (effort is None or e == effort)


@functools.cache
def paper_elements() -> PaperElements:
    """The paper's elements, read from ``ELEMENTS_FILE`` once (at the first coverage, not at import)."""
    from cocoeval.core.yamlio import load

    d = load(ELEMENTS_FILE.read_text(encoding="utf-8"), ELEMENTS_FILE)

    def rx(p: str) -> re.Pattern[str]:
        return re.compile(p.replace("{date}", _DATE))

    models = {k: (rx(v["pattern"]), v["paper"], tuple(v["ks"])) for k, v in d["models"].items()}
    return PaperElements(
        models=models,
        prompts=dict(d["prompts"]),
        sft_ks=tuple(d["sft_ks"]),
        user_simulator=models[d["user_simulator_model"]][0],
        judges={
            k: (_judge_test(rx(v["pattern"]), v.get("reasoning_effort")), v["params_name"])
            for k, v in d["judges"].items()
        },
        kinds=tuple(d["kinds"]),
        datasets={k: (v["what"], v["fetch"], v["source"]) for k, v in d["datasets"].items()},
        sharechat=d["sharechat"],
        demo_datasets=tuple(d["demo_datasets"]),
        human_annotations={k: (v["paper"], v["what"]) for k, v in d["human_annotations"].items()},
    )


@dataclass
class _View:
    """What coverage needs to know, from a run or from a params file."""

    setups: list[dict[str, Any]]
    judges: list[dict[str, Any]]
    datasets: set[str] | None
    """None: not known (a benchmark folder not built yet)."""
    annotators: dict[str, set[str]]
    """{kind: annotators with judgments of that kind}."""
    simulated: set[str] | None = None
    """Setups with an ok continuation (None: a params file, nothing simulated yet)."""
    judged: dict[str, set[str]] | None = None
    """{judge: kinds it has ok judgments of} (None: a params file)."""


def _params_datasets(params: ExperimentParams, exp: Experiment | None) -> set[str] | None:
    """The datasets a params file's benchmark will have: from ``build`` (the shipped demo data, or
    each source's dataset as the loaders name it) or the benchmark folder's split file."""
    b = params.build
    found: set[str] | None
    if b is not None:
        found = set(paper_elements().demo_datasets) if b.demo_data else set()
        for spec in b.sources:
            kind, _, rest = spec.partition(":")
            path, _, ds = rest.partition("#")
            parts = [p.lower() for p in PurePath(path).parts]
            if ds:
                found.add(ds)
            elif kind == "qmsum":
                named = [d for d in ("product", "academic", "committee") if d in parts]
                found.update(f"qmsum_{d}" for d in (named or ["product", "academic", "committee"]))
            elif kind == "convokit":
                found.add("iq2" if "iq2" in path.lower() else (PurePath(path).name or "convokit").lower())
            elif kind == "tcr":
                found.add(PurePath(path).stem.lower())
            elif kind == "chat":
                found.add("chat")
    else:
        found = None
        if exp is not None:
            split = exp.bench_dir() / f"{params.instances.split}.jsonl"
            if split.is_file():
                found = _jsonl_datasets(split)
            elif split.with_suffix(".parquet").is_file():  # a benchmark exported by cocoeval bench-export
                found = _parquet_datasets(split.with_suffix(".parquet"))
    if found is not None and params.instances.datasets is not None:
        found &= set(params.instances.datasets)
    return found


def _parquet_datasets(path: Path) -> set[str] | None:
    import polars as pl

    try:
        return {str(d) for d in pl.read_parquet(path, columns=["dataset"])["dataset"].to_list()}
    except Exception:  # unreadable: the run itself reports it; coverage only cannot say
        return None


def _jsonl_datasets(path: Path) -> set[str] | None:
    try:
        with path.open(encoding="utf-8") as fh:
            return {str(json.loads(line).get("dataset")) for line in fh if line.strip()}
    except (OSError, ValueError, AttributeError, RecursionError):  # a bad file is the loader's to name
        return None


def _kinds(js: Iterable[Any]) -> set[str]:
    """The kinds of judgment with at least one ok judgment among ``js``."""
    return {j.kind for j in js if j.status == "ok"}


@dataclass(frozen=True)
class RunFacts:
    """What coverage needs of a run's records, kept as JSON with the frames (``to_json``, in
    ``facts.json`` under ``coverage``) so that a store (``RunStore``) is not read for it."""

    datasets: tuple[str, ...]
    """The datasets of the run's instances, sorted: which of the paper's datasets it has."""
    annotators: dict[str, tuple[str, ...]]
    """{kind of judgment: the annotators with ok human judgments of that kind, sorted}: whether the
    paper's human annotations are there."""
    simulated: tuple[str, ...]
    """The setups with a current ok continuation, sorted: a setup of the paper counts once it has one."""
    judged: dict[str, tuple[str, ...]]
    """{LLM judge: the kinds it has ok judgments of, sorted}: a judge counts once it has both."""

    @classmethod
    def of(cls, run: RunLike) -> RunFacts:
        """The facts of ``run``, from its records."""
        annotators: dict[str, set[str]] = {}
        for who, js in run.human.items():
            for kind in _kinds(js):
                annotators.setdefault(kind, set()).add(who)
        return cls(
            datasets=tuple(sorted({i.dataset for i in run.instances})),
            annotators={k: tuple(sorted(v)) for k, v in sorted(annotators.items())},
            simulated=tuple(
                sorted(n for n, cs in run.current_continuations.items() if any(c.status == "ok" for c in cs))
            ),
            judged={n: tuple(sorted(_kinds(js))) for n, js in run.judgments.items()},
        )

    def to_json(self) -> dict[str, Any]:
        """The form kept in ``facts.json``: ``{datasets, annotators, simulated, judged}`` with lists."""
        return {
            "datasets": list(self.datasets),
            "annotators": {k: list(v) for k, v in self.annotators.items()},
            "simulated": list(self.simulated),
            "judged": {k: list(v) for k, v in self.judged.items()},
        }

    @classmethod
    def from_json(cls, facts: Any) -> RunFacts | None:
        """The facts ``to_json`` wrote, read back; None when ``facts`` has not that layout (kept by
        another version, or damaged: the caller makes them again from the records)."""

        def names(x: Any) -> bool:
            return isinstance(x, list) and all(isinstance(v, str) for v in x)

        if not (
            isinstance(facts, dict)
            and set(facts) == {"datasets", "annotators", "simulated", "judged"}
            and names(facts["datasets"])
            and names(facts["simulated"])
            and all(
                isinstance(v, dict) and all(isinstance(k, str) and names(x) for k, x in v.items())
                for v in (facts["annotators"], facts["judged"])
            )
        ):
            return None
        return cls(
            datasets=tuple(facts["datasets"]),
            annotators={k: tuple(v) for k, v in facts["annotators"].items()},
            simulated=tuple(facts["simulated"]),
            judged={k: tuple(v) for k, v in facts["judged"].items()},
        )


def run_facts(run: RunLike) -> dict[str, Any]:
    """``RunFacts.of(run)`` as JSON (``RunFacts.to_json``): what ``frames.open_run_dir`` keeps in
    the run's ``facts.json``, the file it is written to."""
    return RunFacts.of(run).to_json()


def _view(source: RunLike | ExperimentParams | Experiment) -> _View:
    from cocoeval.run import Experiment, ExperimentParams

    if not isinstance(source, ExperimentParams | Experiment):  # a run (read whole or a store)
        from .store import kept_facts  # polars: not for a params file (cocoeval check)

        params = source.manifest.params
        setups = [s.model_dump(mode="json") for s in params.setups or []]
        judges = [j.model_dump(mode="json") for j in params.judges or []]
        facts = RunFacts.from_json((kept_facts(source) or {}).get("coverage"))
        if facts is None:  # none kept (or not as RunFacts.to_json writes them): from the records
            facts = RunFacts.of(source)
        return _View(
            setups,
            judges,
            set(facts.datasets),
            {k: set(v) for k, v in facts.annotators.items()},
            set(facts.simulated),
            {k: set(v) for k, v in facts.judged.items()},
        )
    exp = None if isinstance(source, ExperimentParams) else source
    p = source if isinstance(source, ExperimentParams) else source.params
    annotators: dict[str, set[str]] = {}
    if exp is not None:
        from cocoeval.run.humans import HUMAN_DIR

        for store in sorted((exp.run_dir / HUMAN_DIR).glob("*.jsonl")):
            try:
                kinds = {
                    json.loads(line).get("kind")
                    for line in store.read_text(encoding="utf-8").splitlines()
                    if line.strip()
                }
            except (OSError, ValueError, AttributeError):
                continue
            for kind in kinds:
                annotators.setdefault(str(kind), set()).add(store.name[: -len(".jsonl")])
    return _View(
        [s.model_dump() for s in p.setups], [j.model_dump() for j in p.judges], _params_datasets(p, exp), annotators
    )


def _multiparty(s: dict[str, Any]) -> bool:
    return (s.get("kind") or "multiparty") == "multiparty"


def _fine_tuned(model: str) -> bool:
    return ":ft:" in model or "/ft:" in model or model.startswith("ft:")


def _ks(ks: Iterable[int]) -> str:
    return ", ".join(str(k) for k in ks)


def paper_coverage(source: RunLike | ExperimentParams | Experiment) -> list[Missing]:
    """Every element of the paper that ``source`` lacks, in the paper's order: a ``Run`` (its
    manifest params, instances and human stores: a setup counts once it has an ok continuation, a
    judge once it has ok judgments of both kinds) or, before running, an ``ExperimentParams`` or an
    ``Experiment`` (its params; with an ``Experiment`` also its benchmark folder and its run
    directory's annotation stores)."""
    el = paper_elements()
    v = _view(source)
    out: list[Missing] = []

    def state(names: list[str]) -> str | None:
        """None when one of the matching setups is there; else why not."""
        if not names:
            return "no setup"
        if v.simulated is not None and not set(names) & v.simulated:
            return "in the params, no ok continuation yet"
        return None

    def setups(pred: Any) -> list[str]:
        return [str(s.get("name")) for s in v.setups if pred(s)]

    for model, (pattern, figs, ks) in el.models.items():
        for prompt, rqs in el.prompts.items():
            gaps: dict[str, list[int]] = {}
            for k in ks:
                why = state(
                    setups(
                        lambda s, k=k, prompt=prompt, pattern=pattern: (
                            _multiparty(s)
                            and not _fine_tuned(str(s.get("model", "")))
                            and s.get("prompt") == prompt
                            and s.get("turns_per_call") == k
                            and pattern.match(_base(str(s.get("model", ""))))
                        )
                    )
                )
                if why:
                    gaps.setdefault(why, []).append(k)
            if gaps:
                out.append(
                    Missing(
                        "simulators",
                        f"{model} · {prompt} setups",
                        f"{rqs}; {figs}",
                        "; ".join(f"{why} with k = {_ks(g)}" for why, g in gaps.items()),
                        HOW["grid"],
                    )
                )
    gaps = {}
    for k in el.sft_ks:
        why = state(
            setups(
                lambda s, k=k: (
                    _multiparty(s)
                    and _fine_tuned(str(s.get("model", "")))
                    and s.get("prompt") == "vanilla"
                    and s.get("turns_per_call") == k
                )
            )
        )
        if why:
            gaps.setdefault(why.replace("no setup", "no fine-tuned (`ft:`) vanilla setup"), []).append(k)
    if gaps:
        out.append(
            Missing(
                "simulators",
                "SFT setups (gpt-4.1 fine-tuned on human conversations)",
                "RQ4 (§5.4): Table 4's SFT rows, Figure 3(g)",
                "; ".join(f"{why} with k = {_ks(g)}" for why, g in gaps.items()),
                HOW["sft"],
            )
        )
    why = state(
        setups(
            lambda s: (
                _multiparty(s)
                and _fine_tuned(str(s.get("model", "")))
                and s.get("prompt") == "copy_then_continue"
                and s.get("turns_per_call") == 1
                and (s.get("presence_penalty") or 0) > 0
            )
        )
    )
    if why:
        out.append(
            Missing(
                "simulators",
                "SFT + presence penalty",
                "§5.4, Appendix C.2",
                why.replace(
                    "no setup", "no fine-tuned setup with prompt copy_then_continue, k = 1 and a presence penalty"
                ),
                HOW["sft_pp"],
            )
        )
    why = state(
        setups(lambda s: s.get("kind") == "human_ai" and bool(el.user_simulator.match(_base(str(s.get("model", ""))))))
    )
    if why:
        out.append(
            Missing(
                "simulators",
                "simulated users (gpt-4.1 as the user of a chatbot)",
                "Appendix D.1, Table 13",
                why.replace("no setup", "no `kind: human_ai` setup of gpt-4.1"),
                HOW["user_sim"],
            )
        )

    def judge_state(pred: Any, what: str) -> str | None:
        names = [
            str(j.get("name")) for j in v.judges if pred(_base(str(j.get("model", ""))), j.get("reasoning_effort"))
        ]
        if not names:
            return f"no {what} judge"
        kinds = {k for j in v.judges if str(j.get("name")) in names for k in (j.get("kind") or el.kinds)}
        if lack := [k for k in el.kinds if k not in kinds]:
            return f"judges {', '.join(sorted(kinds)) or 'nothing'} only ({', '.join(lack)} missing)"
        if v.judged is not None:
            have = {k for n in names for k in v.judged.get(n, set())}
            if lack := [k for k in el.kinds if k not in have]:
                return f"in the params, no ok {' or '.join(lack)} judgment yet"
        return None

    if why := judge_state(lambda m, e: m.startswith("o4-mini"), "o4-mini"):
        out.append(
            Missing(
                "judges",
                "o4-mini judge, overall and fine-grained",
                "§5 (Table 4, Figure 3, every RQ), Tables 3, 9, 10",
                why,
                HOW["o4-mini"],
            )
        )
    for element, (pred, name) in el.judges.items():
        if why := judge_state(pred, element.removesuffix(" judge")):
            out.append(
                Missing(
                    "judges",
                    element,
                    "Appendix B.2, Tables 9, 10",
                    f"{why} (params/paper.yaml: {name})",
                    HOW["alt_judge"],
                )
            )

    for kind, (paper, what) in el.human_annotations.items():
        who = v.annotators.get(kind, set())
        if len(who) < 2:
            detail = "no human annotation" if not who else "one annotator; agreement needs two or more"
            out.append(
                Missing(
                    "human annotations",
                    f"human annotations, {kind.replace('_', '-')} ({what})",
                    paper,
                    detail + (" in the run directory yet" if v.simulated is None and not who else ""),
                    HOW["humans"],
                )
            )

    if v.datasets is None:
        out.append(
            Missing(
                "data",
                "the paper's six datasets",
                "Table 2; Tables 4, 11 (50 eval instances each)",
                "not known before the benchmark folder is built",
                HOW["fetch"].format(fetch="qmsum iq2 tcr", source="qmsum:…, convokit:…, tcr:…"),
            )
        )
    else:
        for ds, (what, fetch, src) in el.datasets.items():
            if ds not in v.datasets:
                out.append(
                    Missing(
                        "data",
                        f"{ds} ({what})",
                        "Table 2; Tables 4, 11 (50 eval instances each)",
                        f"no {ds} instance",
                        HOW["fetch"].format(fetch=fetch, source=src),
                    )
                )
        if el.sharechat not in v.datasets:
            out.append(
                Missing(
                    "data",
                    "ShareChat chats (human–AI)",
                    "Appendix D.1, Table 13 (25 chats)",
                    "no sharechat instance",
                    HOW["sharechat"],
                )
            )
    return out


# ----------------------------------------------------------------------------- rendering
def _steps(missing: list[Missing]) -> tuple[list[str], dict[str, int]]:
    """The distinct steps, numbered in order of first use (several elements share one)."""
    steps = list(dict.fromkeys(m.how for m in missing))
    return steps, {h: i for i, h in enumerate(steps, 1)}


def coverage_markdown(missing: list[Missing], *, heading: str = "##") -> str:
    """The list as a Markdown section: one compact table row per element, the steps below it."""
    head = f"{heading} {TITLE}\n\n" if heading else ""
    if not missing:
        return head + (
            "Every element of the paper that cocoeval lists (its simulator grid, SFT and C.2 setups, the "
            "o4-mini and B.2 judges, human annotations, the six datasets and the ShareChat chats) is here.\n"
        )
    steps, num = _steps(missing)
    rows = "".join(f"| {m.group} | {m.element} | {m.paper} | {m.detail} | {num[m.how]} |\n" for m in missing)
    return (
        head + f"{len(missing)} element(s) of the paper are not in this run; the analyses that need them say "
        '"not run".\n\n| group | element | in the paper | missing | step |\n|---|---|---|---|---|\n'
        + rows
        + "\nSteps that add them (PARAMS: the params file, RUN: the run directory):\n\n"
        + "".join(f"{i}. {h}\n" for i, h in enumerate(steps, 1))
    )


def coverage_summary(missing: list[Missing], *, what: str = "this params file", more: str = "--paper") -> str:
    """The list as one line (``cocoeval check`` by default): how many elements are missing, per
    group, and the option (``more``) that lists them with the steps that add them."""
    if not missing:
        return coverage_text(missing, what=what)
    groups = ", ".join(f"{g} {n}" for g, n in Counter(m.group for m in missing).items())
    return (
        f"paper coverage: {len(missing)} element(s) of the paper are not in {what} ({groups}); "
        f"{more} lists them and the steps that add them"
    )


def coverage_text(missing: list[Missing], *, what: str = "this params file") -> str:
    """The list as plain lines (``cocoeval check --paper``): one per element, then the steps."""
    if not missing:
        return f"paper coverage: {what} has every element of the paper that cocoeval lists"
    steps, num = _steps(missing)
    lines = [
        f"paper coverage: {len(missing)} element(s) of the paper are not in {what} (the analyses that need them "
        'will say "not run"):'
    ]
    lines += [f"  - {m.element} [{m.paper}]: {m.detail.replace('`', '')} (step {num[m.how]})" for m in missing]
    lines.append("  steps that add them:")
    lines += [f"    {i}. {h.replace('`', '')}" for i, h in enumerate(steps, 1)]
    return "\n".join(lines)
