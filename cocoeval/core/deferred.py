"""Third-party work deferred to its first use: where a package that cocoeval's libraries import
does at import time a costly thing that cocoeval never needs, a stand-in takes its place and does
it when, and only if, something uses it. The answers stay those of the real package."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

IRI_PACKAGE = "rfc3987_syntax"


class _Deferred(types.ModuleType):
    """A module standing in for ``name`` until its first use: ``is_valid_syntax`` (the one name
    jsonschema imports from it) and any other attribute import the real module, which then
    replaces the stand-in in ``sys.modules``."""

    def __init__(self, name: str, spec: Any) -> None:
        super().__init__(name, f"stand-in for {name} until its first use (cocoeval.core.deferred)")
        self.__spec__ = spec
        if spec.submodule_search_locations is not None:  # asked by every ``from name import x``
            self.__path__ = list(spec.submodule_search_locations)
        self._real: types.ModuleType | None = None

        def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
            return self._load().is_valid_syntax(*args, **kwargs)

        self.is_valid_syntax = is_valid_syntax

    def _load(self) -> types.ModuleType:
        if self._real is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            self._real = importlib.import_module(self.__name__)
        return self._real

    def __getattr__(self, name: str) -> Any:
        if name == "_real":  # before __init__ set it
            raise AttributeError(name)
        return getattr(self._load(), name)


def defer_iri_grammar() -> None:
    """jsonschema, which Altair imports, runs ``from rfc3987_syntax import is_valid_syntax`` at
    import when that optional package is installed (Jupyter's ``jupyter-events`` brings it), and
    ``rfc3987_syntax`` compiles 38 Lark grammars when imported: 1.2 s on an idle core, 3–4 s on a
    busy one, in every process that draws a chart, for the ``iri`` format checks of a
    ``FormatChecker`` that neither Altair nor cocoeval makes. This puts a stand-in in its place
    (``_Deferred``) that imports the real package at its first use, so a program that does check
    IRIs gets the same answers, once, later. Nothing happens when the package is absent, already
    imported, or when jsonschema was imported before (it holds the real function then)."""
    if IRI_PACKAGE in sys.modules or "jsonschema" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(IRI_PACKAGE)
    except (ImportError, ValueError):
        return
    if spec is not None:
        sys.modules[IRI_PACKAGE] = _Deferred(IRI_PACKAGE, spec)
