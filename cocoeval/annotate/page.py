"""The annotation page (``cocoeval annotate-export RUN --out DIR --html`` writes ``DIR/annotate.html``).

One file that opens from ``file://`` with no server and no network (a content security policy
as the HTML report's: nothing loads from outside the file). It shows what the CSV export hands to
annotators, read back from the export folder: the same items in the same order with the same item
ids (blind: the key stays in ``key.json``), the instructions of ``instructions.md`` (the judge's
own), and per item the metadata M, the summary S, the history (folded) and the numbered turns. Per
numbered turn a checkbox for each behaviour of the taxonomy, one for "no behaviour" and a "not in
the taxonomy" text; per overall item the two Likert scores. Keys: digits 1-9 and 0 toggle the first
ten behaviours of the focused turn (only while the focus is on it: after a click elsewhere a key
labels nothing), ``x`` toggles "no behaviour", ``n``/``p`` move to the next or previous turn.

The page asks for the annotator's name first and shows the items after Start. Progress is kept in
the browser (``localStorage``, keyed by the export's id, a hash of its items, and that name): every
``file://`` page of a browser profile shares one storage, so keyed by the export alone a second
annotator on the same browser would inherit, and export as theirs, the first's labels. A reload or
a later visit with the same name goes on where the annotator stopped. The Export button downloads
the labels as a CSV sheet in the template's columns, which ``cocoeval annotate-import FILE RUN
--key DIR/key.json`` reads as it is: only turns labelled (a behaviour or "no behaviour" ticked) and
overall items with both scores are written, so nothing unlabelled is read as zero behaviours; a
turn with only a "not in the taxonomy" note is left out too, and the export's message counts such
turns.

Every text of the export (turns, names, summaries) reaches the page as JSON data and is put into
the page with ``textContent``, never as markup; the JSON block escapes ``<``, ``>`` and ``&`` so no
text can close its ``<script>`` element."""

from __future__ import annotations

import hashlib
import html
from importlib import resources
from pathlib import Path
from typing import Any

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import iter_jsonl, script_json, write_atomic
from cocoeval.core.taxonomy import Taxonomy

from .rows import NONE

PAGE = "annotate.html"
"""The page's file name in the export folder."""
LIKERT = ("consistency", "collaborativeness")
"""The overall items' scores, as the template's columns (whole numbers 1-10)."""
COLUMNS = ("annotator", "item_id", "turn", "behaviours", "not_in_taxonomy", *LIKERT)
"""The columns of the sheet the Export button writes (those of ``template.csv`` that an
annotator fills, beside the item id)."""

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'none'; base-uri 'none'"
)
"""Nothing may load from outside the page: no network, no other file."""

HOW_TO_PAGE = (
    "Put your name or id in and press Start first: your work is kept in this browser under that name "
    "(another annotator on this browser reloads the page and starts under theirs). "
    "On this page: tick every behaviour a numbered turn shows, or 'no behaviour' when it shows none "
    "(a turn with nothing ticked is not annotated, never counted as no behaviour). Keys, on a turn "
    "(click it first; a click elsewhere leaves it): 1-9 and 0 toggle the first ten behaviours, "
    "x toggles 'no behaviour', n and p move to the next and previous turn. Describe a behaviour the "
    "list lacks in 'not in the taxonomy' (and tick what the turn shows). Give both scores of an item "
    "marked overall. When done (or whenever you like), press Export and send the file it downloads."
)


def _asset(name: str) -> str:
    return resources.files("cocoeval.annotate").joinpath("page_assets", name).read_text(encoding="utf-8")


def export_id(items_text: str) -> str:
    """The export's id: a hash of its ``items.jsonl`` (the same export, the same id; the page keeps
    each export's progress apart under it)."""
    return hashlib.sha256(items_text.encode("utf-8")).hexdigest()[:16]


def page_data(folder: Path, taxonomy: Taxonomy) -> dict[str, Any]:
    """What the page shows, read from an export folder (``items.jsonl``, ``instructions.md``)."""
    items_path = folder / "items.jsonl"
    try:
        items_text = items_path.read_text(encoding="utf-8")
        instructions = (folder / "instructions.md").read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(
            f"the export folder is not readable ({e})",
            file=str(folder),
            hint="write the page with annotate-export --html",
        ) from None
    items = [obj for _, obj in iter_jsonl(items_path)]
    return {
        "export_id": export_id(items_text),
        "instructions": instructions,
        "how_to": HOW_TO_PAGE,
        "none": NONE,
        "likert": list(LIKERT),
        "columns": list(COLUMNS),
        "behaviours": [{"id": b.id, "name": b.name, "definition": b.definition} for b in taxonomy.behaviours],
        "items": items,
    }


def write_page(folder: str | Path, taxonomy: Taxonomy) -> Path:
    """Write ``folder/annotate.html`` for the export in ``folder`` (see the module's text); returns
    its path."""
    out = Path(folder)
    data = page_data(out, taxonomy)
    title = f"Annotation ({len(data['items'])} items)"
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_asset('annotate.css')}</style>\n</head>\n<body>\n"
        f'<header id="an-head"><h1>{html.escape(title)}</h1><div id="an-bar"></div></header>\n'
        '<main id="an-main"></main>\n'
        f'<script type="application/json" id="an-data">{script_json(data)}</script>\n'
        f"<script>{_asset('annotate.js')}</script>\n</body></html>\n"
    )
    path = out / PAGE
    write_atomic(path, page)
    return path
