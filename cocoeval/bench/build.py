"""The benchmark builder: conversations -> CoCoEval instances (M, S, x[30], r[30]).

For each conversation long enough, non-overlapping windows of ``history_turns +
reference_turns`` are laid on a randomly offset (seeded) grid after ``min_prior_turns`` turns
that are left for the summary. Conversations are shuffled per dataset and split, whole, into
eval and train: the two splits never share a source conversation. Eval windows are taken
round-robin across the eval conversations (one per conversation first, then a second, ...).

Chats (source kind ``chat``: the human–AI generalization study, paper D.1) follow
``BuildConfig.chat``: conversations with at least ``min_turns`` turns (more than 60), one window
each, ``conversations`` of them (25), all in eval.

With LLM context options (``llm_context``) the build does what the paper did (§3.2, A.3, E.1):
the clean-up of the chosen datasets' turns first, then the windows, then M per conversation and S
per instance; every instance records how its M, S and turn texts were made.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from cocoeval import __version__
from cocoeval.core.files import portable_path
from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Conversation, Instance, Provenance, Turn, is_human_ai
from cocoeval.sources import SourceReport, SourceSpec, load_conversations, parse_source_spec

from .config import BuildConfig
from .extractive import SummaryIndex, extractive_metadata

if TYPE_CHECKING:
    from cocoeval.llm import Call, Runner

    from .config import LLMContextOptions


def merge_consecutive(turns: list[Turn]) -> list[Turn]:
    out: list[Turn] = []
    for t in turns:
        if out and out[-1].speaker == t.speaker:
            prev = out[-1]
            raw = None
            if prev.raw_text is not None or t.raw_text is not None:
                raw = f"{prev.raw_text or prev.text} {t.raw_text or t.text}"
            out[-1] = prev.model_copy(
                update={"text": f"{prev.text} {t.text}", "raw_text": raw, "merged": (prev.merged or 1) + 1}
            )
        else:
            out.append(t)
    return out


def candidate_windows(n_turns: int, cfg: BuildConfig, rng: random.Random) -> list[int]:
    """Start indices (of x) of non-overlapping windows on a randomly offset grid."""
    room = n_turns - cfg.min_prior_turns
    count = room // cfg.window
    if count <= 0:
        return []
    offset = rng.randint(0, room - count * cfg.window)
    return [cfg.min_prior_turns + offset + j * cfg.window for j in range(count)]


def make_instance(
    conv: Conversation, start: int, split: str, cfg: BuildConfig, index: SummaryIndex | None = None
) -> Instance:
    index = index or SummaryIndex(conv.turns[:start])
    history = conv.turns[start : start + cfg.history_turns]
    reference = conv.turns[start + cfg.history_turns : start + cfg.window]
    text = conv.meta.get("text_cleaning") or {}
    return Instance(
        id=f"{conv.dataset}/{conv.id}/{start}",
        dataset=conv.dataset,
        split=split,  # type: ignore[arg-type]
        metadata=extractive_metadata(conv, history),
        summary=index.summary(start),
        history=history,
        reference=reference,
        kind="human_ai" if is_human_ai(conv) else "multiparty",
        provenance=Provenance(
            source_file=conv.source_file,
            source_format=conv.source_format,
            conversation_id=conv.id,
            start_index=start,
            history_source_index=history[0].source_index,
            seed=cfg.seed,
            builder_version=__version__,
            text_method=text.get("method", "rule"),
            text_model=text.get("model"),
            text_prompt=text.get("prompt"),
        ),
    )


def _round_robin(items: list[tuple[Conversation, list[int]]], limit: int | None) -> list[tuple[Conversation, int]]:
    out: list[tuple[Conversation, int]] = []
    depth = 0
    while limit is None or len(out) < limit:
        layer = [(c, w[depth]) for c, w in items if depth < len(w)]
        if not layer:
            break
        out.extend(layer if limit is None else layer[: limit - len(out)])
        depth += 1
    return out


class BuildResult(BaseModel):
    eval: list[Instance]
    train: list[Instance]
    report: dict


def build_instances(conversations: Iterable[Conversation], cfg: BuildConfig) -> BuildResult:
    """Cut conversations into eval and train instances; report everything skipped."""
    by_ds: dict[str, dict[str, Conversation]] = defaultdict(dict)
    skipped: list[dict] = []

    def skip(c: Conversation, reason: str) -> None:
        skipped.append({"dataset": c.dataset, "conversation": c.id, "file": c.source_file, "reason": reason})

    for c in conversations:
        if c.id in by_ds[c.dataset]:
            skip(
                c,
                f"duplicate conversation id in dataset {c.dataset} (first kept: {by_ds[c.dataset][c.id].source_file})",
            )
            continue
        by_ds[c.dataset][c.id] = c

    evals: list[Instance] = []
    trains: list[Instance] = []
    datasets: dict[str, dict] = {}
    indexes: dict[tuple[str, str], SummaryIndex] = {}

    def inst(c: Conversation, start: int, split: str) -> Instance:
        key = (c.dataset, c.id)
        if key not in indexes:  # analyse each conversation once for all its windows
            indexes[key] = SummaryIndex(c.turns)
        return make_instance(c, start, split, cfg, indexes[key])

    base = cfg
    for ds in sorted(by_ds):
        is_chat = any(is_human_ai(c) for c in by_ds[ds].values())
        cfg = base.for_chats() if is_chat else base
        usable: list[tuple[Conversation, list[int]]] = []
        for cid in sorted(by_ds[ds]):
            c = by_ds[ds][cid]
            if cfg.merge_same_speaker:
                c = c.model_copy(update={"turns": merge_consecutive(c.turns)})
            need = cfg.min_prior_turns + cfg.window
            if is_chat and cfg.chat.ids is not None and cid not in cfg.chat.ids:
                skip(c, "not among the chats chosen in build options chat.ids")
                continue
            if len(c.turns) < need:
                skip(
                    c,
                    f"too short: {len(c.turns)} turns after cleaning, need {need} "
                    f"({cfg.min_prior_turns} prior + {cfg.history_turns} history + "
                    f"{cfg.reference_turns} reference)"
                    + (f"; chats need at least chat.min_turns = {cfg.chat.min_turns}" if is_chat else ""),
                )
                continue
            if len({t.speaker for t in c.turns}) < 2:
                skip(c, f"single speaker ({c.turns[0].speaker}): not a conversation")
                continue
            rng = random.Random(f"{cfg.seed}/{ds}/{cid}")
            starts = [
                s
                for s in candidate_windows(len(c.turns), cfg, rng)
                if len({t.speaker for t in c.turns[s : s + cfg.window]}) >= cfg.min_speakers
            ]
            if not starts:
                skip(c, f"no window with at least {cfg.min_speakers} distinct speakers")
                continue
            rng.shuffle(starts)
            usable.append((c, starts[: cfg.max_windows_per_conversation]))
        random.Random(f"{cfg.seed}/{ds}").shuffle(usable)
        n_eval = 0
        if cfg.per_dataset > 0 and usable:
            n_eval = min(len(usable), cfg.per_dataset, max(1, int(cfg.eval_share * len(usable))))
            cap = sum(len(w) for _, w in usable[:n_eval])
            while cap < cfg.per_dataset and n_eval < len(usable) - 1:
                cap += len(usable[n_eval][1])
                n_eval += 1
        ev = _round_robin(usable[:n_eval], cfg.per_dataset)
        tr = _round_robin(usable[n_eval:], cfg.train_per_dataset)
        evals += sorted((inst(c, s, "eval") for c, s in ev), key=lambda i: i.id)
        trains += sorted((inst(c, s, "train") for c, s in tr), key=lambda i: i.id)
        info: dict[str, Any] = {
            "conversations": len(by_ds[ds]),
            "usable_conversations": len(usable),
            "eval_conversations": n_eval,
            "train_conversations": len(usable) - n_eval,
            "eval_instances": len(ev),
            "train_instances": len(tr),
        }
        if is_chat:
            info["selection"] = (
                f"chats: at least {cfg.chat.min_turns} turns, {cfg.per_dataset} conversations "
                "(build options chat.conversations, at most per_dataset), one window each, all eval"
            )
        if len(ev) < cfg.per_dataset:
            info["eval_shortfall"] = (
                f"asked for {cfg.per_dataset} eval instances, {len(ev)} fit in {n_eval} eval conversations"
            )
        datasets[ds] = info
    cfg = base
    report = {
        "builder_version": __version__,
        "config": cfg.model_dump(mode="json"),
        "datasets": datasets,
        "totals": {"eval_instances": len(evals), "train_instances": len(trains), "skipped_conversations": len(skipped)},
        "skipped_conversations": skipped,
    }
    return BuildResult(eval=evals, train=trains, report=report)


def build(
    sources: Sequence[str | SourceSpec],
    out: str | Path,
    cfg: BuildConfig | None = None,
    on_error: str = "fail",
    llm_context: LLMContextOptions | None = None,
    runner: Runner | None = None,
) -> dict:
    """Load every source, build, and write ``eval.jsonl``, ``train.jsonl`` and ``report.json``.
    With ``llm_context``, the clean-up, M and S are made by the given models through ``runner``
    (a default cached Runner when None), as the paper made them; without, M and S are extractive
    and the turns keep the loaders' rule-based cleaning (each instance says which)."""
    cfg = cfg or BuildConfig()
    specs = [parse_source_spec(s) if isinstance(s, str) else s for s in sources]
    conversations, source_reports = _load(specs, on_error)
    llm = llm_context if llm_context is not None and llm_context.any else None
    run: Runner | None = None
    ctx_report: dict = {}
    failed_convs: list[dict] = []
    if llm is not None:
        from cocoeval.llm import Runner as _Runner

        run = runner or _Runner()
    if llm is not None and llm.clean:
        from .llm_context import clean_conversations

        assert run is not None
        conversations, ctx_report["clean"] = clean_conversations(conversations, llm, run, _worth_cleaning(cfg))
        failed_convs = ctx_report["clean"]["failed"]
    result = build_instances(conversations, cfg)
    report = {**result.report, "sources": source_reports}
    report["context"] = _methods(llm)
    from cocoeval.sources.fetch import fetched_data

    if fetched := fetched_data([s.path for s in specs]):  # what `cocoeval fetch` recorded of the data read
        # the manifest by its folder's name and its own (the machine's folders stay out of the report)
        report["fetched_data"] = [
            {**e, "manifest": Path(e["manifest"]).parent.name + "/" + Path(e["manifest"]).name} for e in fetched
        ]
    if failed_convs:
        report["skipped_conversations"] = result.report["skipped_conversations"] + failed_convs
    if llm is not None and (llm.metadata or llm.summary):
        from .llm_context import enrich

        assert run is not None
        by_key = _by_key(conversations, cfg)
        result.eval, ctx_report["eval"] = enrich(result.eval, by_key, llm, run)
        result.train, ctx_report["train"] = enrich(result.train, by_key, llm, run)
        _recount(report, result, cfg)
    if llm is not None:
        report["llm_context"] = {"options": llm.model_dump(mode="json"), **ctx_report}
    report["totals"] = {
        **report["totals"],
        "eval_instances": len(result.eval),
        "train_instances": len(result.train),
        "skipped_conversations": len(report["skipped_conversations"]),
    }
    out = Path(out)
    write_jsonl(out / "eval.jsonl", result.eval)
    write_jsonl(out / "train.jsonl", result.train)
    write_json(out / "report.json", report)
    return report


def portable(path: str | Path, root: str | Path) -> str:
    """``path`` as the benchmark records it: relative to the folder that holds the source ``root``
    (so ``qmsum:/home/me/data/qmsum/data`` records ``data/Product/train/ES2002a.json``), never an
    absolute path of the machine that built it (a card or report shared with it would show the
    builder's folders, and two builds of the same data on two machines would differ). A path
    outside that folder is recorded by its name."""
    return portable_path(path, root, base_parent=True)


def _load(specs: Sequence[SourceSpec], on_error: str) -> tuple[list[Conversation], list[dict]]:
    conversations: list[Conversation] = []
    source_reports = []
    for spec in specs:
        rep = SourceReport()
        convs = load_conversations(spec, rep, on_error=on_error)  # type: ignore[arg-type]
        conversations += [c.model_copy(update={"source_file": portable(c.source_file, spec.path)}) for c in convs]
        d = rep.to_dict()
        for key in ("skipped", "merged_speakers"):  # each names its file
            d[key] = [{**x, "file": portable(x["file"], spec.path)} if x.get("file") else x for x in d[key]]
        source = SourceSpec(spec.kind, Path(portable(spec.path, spec.path)), spec.dataset)
        source_reports.append({"source": str(source), **d})
    return conversations, source_reports


def _worth_cleaning(cfg: BuildConfig) -> Callable[[Conversation], bool]:
    """A conversation the clean-up is sent: long enough to give an instance, more than one speaker."""
    return lambda c: len(c.turns) >= cfg.need(c) and len({t.speaker for t in c.turns}) > 1


def _by_key(conversations: Iterable[Conversation], cfg: BuildConfig) -> dict[tuple[str, str], Conversation]:
    """The conversations M and S are made from, by (dataset, id), as the builder windowed them."""
    by_key: dict[tuple[str, str], Conversation] = {}
    for c in conversations:
        if (c.dataset, c.id) not in by_key:  # the builder keeps the first of duplicates too
            by_key[(c.dataset, c.id)] = (
                c.model_copy(update={"turns": merge_consecutive(c.turns)}) if cfg.merge_same_speaker else c
            )
    return by_key


class PlannedCall(NamedTuple):
    """One benchmark-creation call the build would send: its kind (clean, metadata, summary),
    split (None for the clean-up, which comes before windowing), the call, and for a clean-up
    chunk its source turns."""

    kind: str
    split: str | None
    call: Call
    turns: list[Turn]


@dataclass
class ContextPlan:
    """The calls a build with LLM context would send, in its order (clean-up, then M and S of
    the eval split, then of the train split), and per dataset what they cover: ``clean_chunks``,
    ``metadata_conversations``, ``eval_instances``/``train_instances`` (the windows), and
    ``eval_summaries``/``train_summaries``. ``cached``: kinds the benchmark already holds,
    with why they are not counted (``step.already_made``)."""

    options: LLMContextOptions
    calls: list[PlannedCall] = field(default_factory=list)
    datasets: dict[str, dict[str, int]] = field(default_factory=dict)
    cached: dict[str, str] = field(default_factory=dict)


PLAN_COUNTS = (
    "clean_chunks",
    "metadata_conversations",
    "eval_instances",
    "train_instances",
    "eval_summaries",
    "train_summaries",
)


def plan_context(
    sources: Sequence[str | SourceSpec],
    cfg: BuildConfig,
    llm_context: LLMContextOptions,
    on_error: str = "fail",
    skip: Iterable[str] = (),
) -> ContextPlan:
    """The clean-up, M and S calls ``build`` would send with ``llm_context``, made by the same
    code, without sending any (``cocoeval estimate``). The windows are those of the uncleaned
    conversations (what the clean-up will empty is not known before it runs); every call is
    taken to succeed. ``skip``: kinds not to plan (already made)."""
    from .llm_context import clean_calls, metadata_calls, summary_calls

    llm, skip = llm_context, set(skip)
    specs = [parse_source_spec(s) if isinstance(s, str) else s for s in sources]
    conversations, _ = _load(specs, on_error)
    plan = ContextPlan(options=llm)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(PLAN_COUNTS, 0))
    if llm.clean and "clean" not in skip:
        _, calls, where = clean_calls(conversations, llm, _worth_cleaning(cfg))
        for call, (i, a, b) in zip(calls, where, strict=True):
            plan.calls.append(PlannedCall("clean", None, call, list(conversations[i].turns[a:b])))
            counts[conversations[i].dataset]["clean_chunks"] += 1
    result = build_instances(conversations, cfg)
    for ds in result.report["datasets"]:
        counts[ds]  # every dataset, also one with no call
    by_key = _by_key(conversations, cfg)
    for split, insts in (("eval", result.eval), ("train", result.train)):
        for inst in insts:
            counts[inst.dataset][f"{split}_instances"] += 1
        if llm.metadata and "metadata" not in skip:
            _, keys, calls = metadata_calls(insts, by_key, llm)
            for key, call in zip(keys, calls, strict=True):
                plan.calls.append(PlannedCall("metadata", split, call, []))
                counts[key[0]]["metadata_conversations"] += 1
        if llm.summary and "summary" not in skip:
            idx, calls = summary_calls(insts, by_key, llm)
            for i, call in zip(idx, calls, strict=True):
                plan.calls.append(PlannedCall("summary", split, call, []))
                counts[insts[i].dataset][f"{split}_summaries"] += 1
    plan.datasets = {ds: counts[ds] for ds in sorted(counts)}
    return plan


def _methods(llm: LLMContextOptions | None) -> dict[str, str]:
    """How M, S and the turn texts were made, in words (report.json, cocoeval build)."""

    def by(model: str | None, what: str) -> str:
        return f"llm ({model})" if model else what

    turns = "rule-based artefact removal (offline default)"
    if llm is not None and llm.clean:
        turns = f"llm clean-up ({llm.clean}) of {', '.join(llm.clean_datasets)}; {turns} elsewhere"
    return {
        "metadata": by(llm.metadata if llm is not None else None, "extractive (offline default)"),
        "summary": by(llm.summary if llm is not None else None, "extractive (offline default)"),
        "turns": turns,
    }


def _recount(report: dict, result: BuildResult, cfg: BuildConfig) -> None:
    """Per-dataset counts after LLM stages left instances out, with the shortfall said."""
    for ds, info in report["datasets"].items():
        ev = sum(i.dataset == ds for i in result.eval)
        tr = sum(i.dataset == ds for i in result.train)
        lost = info["eval_instances"] - ev + info["train_instances"] - tr
        if lost:
            info["skipped_instances"] = lost
            info["eval_instances"], info["train_instances"] = ev, tr
            want = cfg.for_chats().per_dataset if "selection" in info else cfg.per_dataset
            if ev < want:
                info["eval_shortfall"] = (
                    f"asked for {want} eval instances, {ev} remain after "
                    f"{lost} instance(s) were left out by LLM stages "
                    "(reasons in llm_context; a rebuild retries failed calls)"
                )
