"""Source loaders: one module per format, each registered by name, all yielding Conversations.

A source is named on the command line as ``KIND:PATH`` or ``KIND:PATH#DATASET`` (``#DATASET``
overrides the dataset name the loader infers). ``available_sources()`` lists the kinds (``SOURCES``, the registry);
other packages add kinds through the ``cocoeval.sources`` entry-point group.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import (
    SOURCES,
    Loader,
    SourceReport,
    SourceSpec,
    available_sources,
    load_conversations,
    parse_source_spec,
    source,
)
from ._text import clean_transcript

# Importing every public module of this package registers its loaders (no heavy dependencies):
# a new format is one new module here, nothing else to list.
for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = [
    "SOURCES",
    "Loader",
    "SourceReport",
    "SourceSpec",
    "available_sources",
    "clean_transcript",
    "load_conversations",
    "parse_source_spec",
    "source",
]
