"""The benchmark: conversations cut into CoCoEval instances (M, S, x[30], r[30]).

``config`` (what the build takes: windows, chats, LLM-made context, a params file's ``build:``),
``build`` (windows, splits, the instance files), ``store`` (the benchmark folder, JSONL or parquet,
as every reader finds it), ``export`` (parquet with a dataset card), ``extractive`` (offline M and S),
``llm_context`` and ``clean`` (M, S and the clean-up made by models, as the paper made them),
``step`` (the build step of a run)."""

from .build import build, build_instances
from .config import BuildConfig, BuildSection, ChatSelection, LLMContextOptions
from .step import context_lines, run_build
from .store import find_instance, load_instances

__all__ = [
    "BuildConfig",
    "BuildSection",
    "ChatSelection",
    "LLMContextOptions",
    "build",
    "build_instances",
    "context_lines",
    "find_instance",
    "load_instances",
    "run_build",
]
