"""cocoeval: measure how human LLM-simulated multi-party conversations are (CoCoEval).

The package is laid out as the data flows, one subpackage per stage (docs/architecture.md):
``core`` → ``prompts`` → ``sources`` → ``bench`` → ``simulate`` / ``judge`` → ``run`` →
``annotate`` → ``analysis`` → ``notebooks`` → ``cli``, all model calls through ``llm``.
The names below are the most used ones, loaded on first use (``import cocoeval`` stays cheap);
their homes are the subpackages named in ``_EXPORTS``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__version__ = "0.2.0"

_EXPORTS = {
    "cocoeval.bench": ["BuildConfig", "build", "build_instances", "find_instance", "load_instances"],
    "cocoeval.core": [
        "Behaviour",
        "CallRecord",
        "CocoevalError",
        "ConfigError",
        "Continuation",
        "Conversation",
        "InputError",
        "Instance",
        "Judgment",
        "Metadata",
        "NotFoundError",
        "Participant",
        "Provenance",
        "Summary",
        "Taxonomy",
        "Turn",
        "TurnLabel",
        "load_taxonomy",
    ],
    "cocoeval.sources": ["SourceReport", "load_conversations", "parse_source_spec"],
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}


def lazy_exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose public names (``where``: name ->
    module) are imported on first use (PEP 562), so importing the package stays cheap."""
    namespace = sys.modules[package].__dict__

    def get(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return get, lambda: sorted([*namespace, *where])


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

__all__ = ["__version__", "lazy_exports", *sorted(_WHERE)]
