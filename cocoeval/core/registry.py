"""The registry of named things (providers, source formats, simulators, analyses): one generic
``Registry`` with one entry-point loader. It is defined in the LLM layer, which imports nothing of
the package (so the providers' registry can use it), and re-exported here for the other layers."""

from __future__ import annotations

from cocoeval.llm.registry import NotOfKind, Registry, Unloadable

__all__ = ["NotOfKind", "Registry", "Unloadable"]
