"""The documents the judge-free classifier test reads (``detectability``, beyond the paper): the
text of a target's scored turns without the typesetting that only one side can have
(``plain_text``), and one row per continuation of a run with its document (``document_frame``),
which ``frames.open_run_dir`` keeps with the run's frames, so that the first report after
``cocoeval run`` reads no continuation record for the test. Imports no other analysis module but
``store`` (``frames`` imports this one)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.core.schema import conversation_of
from cocoeval.core.targets import continuation_target

from .store import RunLike, derived_frame

if TYPE_CHECKING:
    from cocoeval.core.schema import Instance, Turn

_TAG = re.compile(r"\{\s*[A-Za-z_]+\s*\}")
_MARKUP = re.compile(r"\*\*|__|(?m:^[ \t]*#+[ \t]*)|(?m:^[ \t]*[-*•][ \t]+)")
_QUOTES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "–": "-", "—": "-", "…": "..."})
_WS = re.compile(r"[ \t\r\f\v]+")
_EDGE = re.compile(r"(?m)^ | $")  # a line's one leading or trailing space once runs are one space


def plain_text(turns: Sequence[Turn], speakers: Sequence[str] = ()) -> str:
    """The document of a target: its turns' texts, one a line, without the typesetting that only
    one side can have (see ``detectability``'s text): tags in braces, markdown emphasis, headings
    and bullets, a speaker's name (one of ``speakers``) at the start of a turn (or of a line in
    it), typographic quotes and dashes, runs of white space. Speakers' names are not part of it.
    Each rule runs once over the whole document (a turn's own line breaks are kept)."""
    x = unicodedata.normalize("NFKC", "\n".join(t.text for t in turns)).translate(_QUOTES)
    x = _MARKUP.sub(" ", _TAG.sub(" ", x))
    names = sorted({s for s in speakers if s}, key=len, reverse=True)
    if names:
        x = re.sub(r"(?m)^[ \t]*(?:" + "|".join(re.escape(s) for s in names) + r")[ \t]*:[ \t]*", "", x)
    return _EDGE.sub("", _WS.sub(" ", x))


def speakers_of(inst: Instance) -> list[str]:
    """Every name a turn of ``inst`` may start with: its participants and its turns' speakers."""
    return [*(p.name for p in inst.metadata.participants), *(t.speaker for t in [*inst.history, *inst.reference])]


def document(inst: Instance, turns: Sequence[Turn], judged: Sequence[int]) -> str:
    """The document of a target of ``inst``: ``plain_text`` of its judged turns."""
    return plain_text([turns[i] for i in judged], speakers_of(inst))


DOCUMENT_SCHEMA: dict[str, Any] = {
    "setup": pl.Utf8,
    "instance_id": pl.Utf8,
    "conversation": pl.Utf8,
    "status": pl.Utf8,
    "document": pl.Utf8,
}
"""The columns of ``document_frame``."""
COMPARED, NOT_COMPARED, STALE = "compared", "not compared", "stale"
"""``document_frame``'s statuses: an ok continuation of a known instance (it has a document); a
current one that is invalid or of an instance not in instances.jsonl; one that is not current
(``Run.stale_reason``)."""


@derived_frame("documents", DOCUMENT_SCHEMA)
def document_frame(run: RunLike) -> pl.DataFrame:
    """One row per continuation of ``run`` (setups in the order of ``run.continuations``): setup,
    instance_id, conversation (null for an instance not in instances.jsonl), status (``COMPARED``,
    ``NOT_COMPARED`` or ``STALE``) and, when compared, its ``document``. All the classifier test
    needs of the continuations. Made once per run in a process (``store.per_run``), or read where
    ``frames.open_run_dir`` kept it (no record read)."""
    insts = {i.id: i for i in run.instances}
    rows = []
    for name, cs in run.continuations.items():
        for c in cs:
            inst = insts.get(c.instance_id)
            if run.stale_reason(name, c) is not None:
                status, doc = STALE, None
            elif c.status == "ok" and inst is not None:
                t = continuation_target(inst, name, c)
                status, doc = COMPARED, document(inst, t.turns, t.judged)
            else:
                status, doc = NOT_COMPARED, None
            conv = conversation_of(inst) if inst is not None else None
            rows.append(
                {"setup": name, "instance_id": c.instance_id, "conversation": conv, "status": status, "document": doc}
            )
    return pl.DataFrame(rows, schema=DOCUMENT_SCHEMA, orient="row") if rows else pl.DataFrame(schema=DOCUMENT_SCHEMA)
