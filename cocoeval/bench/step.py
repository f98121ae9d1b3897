"""The build step of a run: the ``build:`` section of a params file (``config.BuildSection``) carried out."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cocoeval.core.errors import ConfigError
from cocoeval.llm import Runner

from .build import build
from .config import BuildSection


def run_build(section: BuildSection, sources: list[str], bench: Path, *, write: bool,
              runner: Runner | None, make_runner: Callable[[], Runner], demo_dir: Path) -> Path:
    """Build into ``bench`` and return the folder to read the instances from. Without ``write``
    (a look such as cocoeval estimate) LLM-made context is never paid for: the extractive build,
    in a scratch folder, gives the instances' shape."""
    if section.demo_data:
        from cocoeval.sources.demo import demo_sources

        sources = sources + demo_sources(demo_dir)
    if not sources:
        raise ConfigError("build: needs sources or demo_data: true", hint="see params/demo.yaml")
    ctx = section.context if section.context is not None and section.context.any else None
    if ctx is not None and not write:
        bench = Path(tempfile.mkdtemp(prefix="cocoeval-bench-"))
        logging.getLogger("cocoeval").warning(
            "warning: no benchmark built yet; using an extractive build (no clean-up, M or S calls) "
            "in %s for this look", bench)
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


def context_lines(report: dict[str, Any]) -> list[str]:
    """What cocoeval build prints about how the inputs were made and what LLM stages left out."""
    ctx = report.get("llm_context", {})
    out = []
    if "clean" in ctx:
        c = ctx["clean"]
        out.append(f"clean-up by {c['model']} of {', '.join(c['datasets'])}: {c['conversations_cleaned']} "
                   f"conversation(s) cleaned, {c['turns_emptied']} turn(s) emptied and dropped, "
                   f"{len(c['failed'])} conversation(s) left out (reasons in report.json)")
    for split in ("eval", "train"):
        for stage, r in ctx.get(split, {}).items():
            if isinstance(r, dict) and "ok" in r:
                done = "kept extractive" if ctx[split]["on_failure"] == "extractive" else "left out"
                out.append(f"{split} {stage} by {r['model']}: {r['ok']} made, {len(r['failed'])} {done} "
                           "(reasons in report.json)")
    out.append("inputs: " + "; ".join(f"{k}: {v}" for k, v in report["context"].items()))
    return out
