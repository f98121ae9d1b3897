"""Source loaders: one module per format, each registered by name, all yielding Conversations.

A source is named on the command line as ``KIND:PATH`` or ``KIND:PATH#DATASET`` (``#DATASET``
overrides the dataset name the loader infers). ``available_sources()`` lists the kinds;
other packages add kinds through the ``cocoeval.sources`` entry-point group.
"""

from __future__ import annotations

# Importing the modules registers their loaders (no heavy dependencies).
from . import chat, convokit, qmsum, tcr  # noqa: F401
from ._registry import (
    Loader,
    SourceReport,
    SourceSpec,
    available_sources,
    load_conversations,
    parse_source_spec,
    source,
)
from ._text import clean_transcript

__all__ = [
    "Loader",
    "SourceReport",
    "SourceSpec",
    "available_sources",
    "clean_transcript",
    "load_conversations",
    "parse_source_spec",
    "source",
]
