"""Speed tricks: what makes cocoeval faster without changing a byte of what it writes. Nothing else
depends on them; a newcomer can ignore this module (and ``analysis.speed``, the report kept beside a
run, which needs the analysis layer and so cannot live here). Each trick has a name, and
``COCOEVAL_SPEED_OFF`` turns tricks off: a comma-separated list of names (``blas,iri``), or
``all``. The outputs are the same either way but for the last bits of some intervals with ``blas``
off (below); only the time changes (``benchmarks/speed_tricks.py`` measures each trick by turning
it off; docs/testing.md has the figures).

- ``blas`` (``one_blas_thread``, around the report, every analysis and the frames kept at the end
  of a run): the analyses' matrix products are small (1,000 resamples × a few hundred instances); a
  second OpenBLAS thread does not make them faster and spins between products on the core the
  report's figure workers render on. OpenBLAS may split a product's sums between threads, which
  changes their last bits (an interval bound of the per-speaker fidelity at the paper's scale, in
  its 17th digit): on one thread wherever they are made, a table kept at the end of a run and the
  same table computed by the report are the same bytes.
- ``iri`` (``defer_iri_grammar``, when ``cocoeval.analysis`` is imported): jsonschema, which Altair
  imports, imports ``rfc3987_syntax`` when that optional package is installed (Jupyter brings it),
  and that package compiles 38 Lark grammars at import, for ``iri`` format checks that neither
  Altair nor cocoeval makes. A stand-in module takes its place and imports it at its first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRICKS = ("blas", "iri", "report")
"""The names ``COCOEVAL_SPEED_OFF`` takes (``report``: ``analysis.speed``, the report kept)."""


def off(trick: str) -> bool:
    """Whether ``COCOEVAL_SPEED_OFF`` turns ``trick`` off (it names it, or says ``all``)."""
    names = {n.strip() for n in os.environ.get("COCOEVAL_SPEED_OFF", "").split(",")}
    return trick in names or "all" in names


# -- blas: the analyses' small products on one thread --


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the block (``blas`` above), as it was after."""
    if off("blas"):
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


# -- iri: jsonschema's RFC 3987 grammar built at its first use --

IRI_PACKAGE = "rfc3987_syntax"


def defer_iri_grammar() -> None:
    """Put a stand-in for ``rfc3987_syntax`` in ``sys.modules`` (``iri`` above) that imports the
    real package at its first use, so a program that does check IRIs gets the same answers, later.
    Nothing happens when the package is absent, already imported, or when jsonschema was imported
    before (it holds the real function then)."""
    if off("iri") or IRI_PACKAGE in sys.modules or "jsonschema" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(IRI_PACKAGE)
    except (ImportError, ValueError):
        return
    if spec is not None:
        sys.modules[IRI_PACKAGE] = _Deferred(IRI_PACKAGE, spec)


class _Deferred(types.ModuleType):
    """A module standing in for ``name`` until its first use: ``is_valid_syntax`` (the one name
    jsonschema imports from it) and any other attribute import the real module, which then
    replaces the stand-in in ``sys.modules``."""

    def __init__(self, name: str, spec: Any) -> None:
        super().__init__(name, f"stand-in for {name} until its first use (cocoeval.core.speed)")
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
