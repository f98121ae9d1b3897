"""The build step of a run: the ``build:`` section of a params file (``config.BuildSection``) carried out."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cocoeval.core.errors import ConfigError
from cocoeval.llm import Runner

from .build import ContextPlan, build, plan_context
from .config import BuildSection, LLMContextOptions
from .store import has_benchmark, load_instances


def run_build(
    section: BuildSection,
    sources: list[str],
    bench: Path,
    *,
    write: bool,
    runner: Runner | None,
    make_runner: Callable[[], Runner],
    demo_dir: Path,
) -> Path:
    """Build into ``bench`` and return the folder to read the instances from. Without ``write``
    (a look such as cocoeval estimate) LLM-made context is never paid for: the extractive build,
    in a scratch folder, gives the instances' shape."""
    sources = _sources(section, sources, demo_dir)
    ctx = section.context if section.context is not None and section.context.any else None
    if ctx is not None and not write:
        bench = Path(tempfile.mkdtemp(prefix="cocoeval-bench-"))
        logging.getLogger("cocoeval").warning(
            "warning: no benchmark built yet; using an extractive build (no clean-up, M or S calls sent) "
            "in %s for this look",
            bench,
        )
        build(sources, bench, section.options)
    elif ctx is not None and runner is None:
        own = make_runner()
        try:
            build(sources, bench, section.options, llm_context=ctx, runner=own)
        finally:
            own.close()
    else:
        build(sources, bench, section.options, llm_context=ctx, runner=runner)
    return bench


def _sources(section: BuildSection, sources: list[str], demo_dir: Path) -> list[str]:
    if section.demo_data:
        from cocoeval.sources.demo import demo_sources

        sources = sources + demo_sources(demo_dir)
    if not sources:
        raise ConfigError("build: needs sources or demo_data: true", hint="see params/demo.yaml")
    return sources


def already_made(bench: Path, ctx: LLMContextOptions) -> dict[str, str]:
    """The kinds of LLM context (clean, metadata, summary) whose calls a build into ``bench``
    needs not pay again: the benchmark there already holds instances (both splits) made with
    ``ctx``'s models, so a rebuild gets their answers from the call cache. Kind -> the reason."""
    if not has_benchmark(bench):
        return {}
    insts = load_instances(bench, None)
    if not insts:
        return {}
    checks = {
        "clean": (ctx.clean, [i.provenance.text_model for i in insts if i.dataset in ctx.clean_datasets]),
        "metadata": (ctx.metadata, [i.metadata.model if i.metadata.method == "llm" else None for i in insts]),
        "summary": (
            ctx.summary,
            [i.summary.model if i.summary.method == "llm" else None for i in insts if i.provenance.start_index > 0],
        ),
    }
    return {
        kind: f"already made by {model} in {bench} ({len(made)} instance(s)): answered from the call cache, not counted"
        for kind, (model, made) in checks.items()
        if model and all(m == model for m in made)
    }


def plan_build(section: BuildSection, sources: list[str], bench: Path, demo_dir: Path) -> ContextPlan | None:
    """The clean-up, M and S calls ``run_build`` would send (None: the section asks for no LLM
    context), made by the build's own code; the kinds the benchmark in ``bench`` already holds
    are listed in ``cached`` and not planned."""
    ctx = section.context if section.context is not None and section.context.any else None
    if ctx is None:
        return None
    cached = already_made(bench, ctx)
    asked = {k for k in ("clean", "metadata", "summary") if getattr(ctx, k)}
    if asked <= set(cached):
        return ContextPlan(options=ctx, cached=cached)
    plan = plan_context(_sources(section, sources, demo_dir), section.options, ctx, skip=cached)
    plan.cached = cached
    return plan


def context_lines(report: dict[str, Any]) -> list[str]:
    """What cocoeval build prints about how the inputs were made and what LLM stages left out."""
    ctx = report.get("llm_context", {})
    out = []
    if "clean" in ctx:
        c = ctx["clean"]
        out.append(
            f"clean-up by {c['model']} of {', '.join(c['datasets'])}: {c['conversations_cleaned']} "
            f"conversation(s) cleaned, {c['turns_emptied']} turn(s) emptied and dropped, "
            f"{len(c['failed'])} conversation(s) left out (reasons in report.json)"
        )
    for split in ("eval", "train"):
        for stage, r in ctx.get(split, {}).items():
            if isinstance(r, dict) and "ok" in r:
                done = "kept extractive" if ctx[split]["on_failure"] == "extractive" else "left out"
                out.append(
                    f"{split} {stage} by {r['model']}: {r['ok']} made, {len(r['failed'])} {done} "
                    "(reasons in report.json)"
                )
    out.append("inputs: " + "; ".join(f"{k}: {v}" for k, v in report["context"].items()))
    return out
