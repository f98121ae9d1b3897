"""The self-contained HTML report (``cocoeval report RUN --out DIR --html`` writes ``DIR/index.html``).

One file that opens from ``file://`` with no server and no network: the Vega, Vega-Lite and
Vega-Embed JavaScript is inlined from vl-convert's bundle (``vl_convert.javascript_bundle``), the
viewer's script and style from ``html_assets/`` (package data), and the data as JSON blocks. It
holds every figure of the report (interactive: tooltips in words), every table, the invalid
accounting, the run's provenance, and the conversation viewer of the notebooks (an instance, the
human reference beside the chosen setups' continuations turn by turn, each turn tagged with the
behaviours the judge found, evidence on hover; filters by dataset, behaviour, setup, judge; a bar
of a Figure-3 chart lists the turns behind it).

Every text of the run (model and human text, names, reasons) reaches the page as JSON data and
is put into the page by the script with ``textContent``, never as markup; the JSON block escapes
``<``, ``>`` and ``&`` so no text can close its ``<script>`` element. Each instance's
conversations are a block of their own (JSON, gzip, base64: ``pack``), inflated and parsed only
when the viewer first shows that instance (or lists its turns behind a bar).

The wording of the marks (invalid, stale, skipped, not simulated) is defined here once and used
by the notebooks' viewer too (``cocoeval.notebooks.widgets``)."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

import cocoeval
from cocoeval.core.files import portable_path, portable_record
from cocoeval.core.jsonio import script_json, write_atomic
from cocoeval.core.schema import unknown_speaker_turns
from cocoeval.core.targets import REFERENCE

from . import headline as hl
from .coverage import TITLE as COVERAGE_TITLE
from .frames import HUMAN, Frames
from .report_doc import ReportDoc, intro_lines, section_lines, title_line
from .store import RunLike
from .verdicts import verdicts

__all__ = [
    "BLOCK_TYPE",
    "NOT_SIMULATED",
    "continuation_note",
    "headline_html",
    "judgment_note",
    "not_simulated_line",
    "pack",
    "payload",
    "render_html",
    "unpack",
    "write_html",
]

NOT_SIMULATED = "not simulated here"
"""The one line that folds the chosen setups without a continuation of the instance."""


def continuation_note(status: str | None, reason: str | None) -> str | None:
    """What a column says instead of (or above) a continuation's turns: "invalid: …", "stale: …";
    None for a current ok continuation."""
    if status in (None, "ok"):
        return None
    return f"{status}: {reason}" if reason else str(status)


def judgment_note(status: str | None, reason: str | None) -> str | None:
    """What a column says about its judgment: "judgment invalid: …", "judgment skipped: no turns
    to judge", "judgment stale: …"; None for a valid one (ok or repaired)."""
    if status in (None, "ok", "repaired"):
        return None
    return f"judgment {status}: {reason}" if reason else f"judgment {status}"


def not_simulated_line(setups: Sequence[str]) -> str | None:
    """ "not simulated here: a, b" for the chosen setups without a continuation of the instance."""
    return f"{NOT_SIMULATED}: {', '.join(setups)}" if setups else None


# ---------------------------------------------------------------------------------------- data


BLOCK_TYPE = "application/gzip+base64"
"""The type of an instance's conversations block: its JSON, gzip-compressed, in base64 (about a
third of the JSON's size for meeting text; the page inflates a block with the browser's
``DecompressionStream`` when it first shows that instance)."""


def pack(obj: Any) -> str:
    """``obj`` as an instance block: JSON, gzip (no timestamp: the same run gives the same
    file), base64."""
    return base64.b64encode(gzip.compress(script_json(obj).encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def unpack(text: str) -> Any:
    """The object of a block (``pack``), as the page reads it."""
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


def _clean(v: Any) -> Any:
    """JSON-ready cell values: NaN is null (undefined)."""
    return None if isinstance(v, float) and v != v else v


def _turns(turns: Iterable[Any]) -> list[list[str]]:
    return [[t.speaker, t.text] for t in turns]


def payload(run: RunLike, f: Frames) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The viewer's data: an index (instances, setups, judges, behaviours, each target's status
    and the labelled turns of every valid fine-grained judgment) and one block per instance
    (M, S, x, the reference, every continuation's turns, the evidence of each label)."""
    tax = f.taxonomy
    insts = sorted(run.instances, key=lambda i: i.id)
    order = {i.id: n for n, i in enumerate(insts)}
    setups = sorted(run.continuations)
    cont_status: dict[tuple[str, str], tuple[str, str | None]] = {
        (r["setup"], r["instance_id"]): (r["status"], r["reason"]) for r in f.continuations.iter_rows(named=True)
    }
    # each judgment as the notebooks' viewer shows it (``verdicts``): where a stale judgment and
    # a counted one share a key, the counted one; labels and evidence only of a valid one
    judg: dict[str, dict[str, dict[str, Any]]] = {}  # judge -> target -> instance index -> entry
    evidence: dict[str, dict[str, dict[str, dict[str, str]]]] = {}  # instance -> judge\0target -> turn -> ...
    for (judge, iid, target), v in verdicts(f).items():
        if iid not in order:
            continue
        e: dict[str, Any] = {"s": v.status}
        if v.reason:
            e["r"] = v.reason
        if v.labels:
            e["l"] = {str(turn): list(bs) for turn, (bs, _) in v.labels.items()}
            if ev := {str(turn): dict(said) for turn, (_, said) in v.labels.items() if said}:
                evidence.setdefault(iid, {})[f"{judge}\u0000{target}"] = ev
        judg.setdefault(judge, {}).setdefault(target, {})[str(order[iid])] = e
    # each valid overall judgment's scores (the viewer's judge-score filter)
    scores: dict[str, dict[str, dict[str, list[int | None]]]] = {}  # judge -> target -> instance index -> [c, k]
    for judge, target, iid, cons, coll in f.likert.select(
        "judge", "target", "instance_id", "consistency", "collaborativeness"
    ).iter_rows():
        if iid in order:
            scores.setdefault(judge, {}).setdefault(target, {})[str(order[iid])] = [cons, coll]
    index: dict[str, Any] = {
        "human": HUMAN,
        "reference": REFERENCE,
        "setups": setups,
        "judges": sorted(set(judg) | set(scores)),
        "scores": scores,
        "datasets": sorted({i.dataset for i in insts}),
        "behaviours": [{"id": b.id, "name": b.name, "category": b.category} for b in tax.behaviours],
        "instances": [],
        "judgments": judg,
    }
    blocks = []
    for inst in insts:
        conts: dict[str, Any] = {}
        ok: dict[str, int] = {}
        for s in setups:
            c = next((c for c in run.continuations[s] if c.instance_id == inst.id), None)
            if c is None:
                continue
            status, reason = cont_status.get((s, inst.id), (c.status, c.reason))
            col: dict[str, Any] = {"s": status}
            if reason:
                col["r"] = reason
            if c.status == "ok":
                col["t"] = _turns(c.turns)
                if unknown := unknown_speaker_turns(inst, c.turns):
                    col["u"] = unknown  # turns by speakers who are not participants
                if status == "ok":
                    ok[s] = len(c.turns)
            conts[s] = col
        m = inst.metadata
        index["instances"].append({"id": inst.id, "dataset": inst.dataset, "ok": ok, "n": len(inst.reference)})
        blocks.append(
            {
                "id": inst.id,
                "dataset": inst.dataset,
                "goals": list(m.goals),
                "participants": [[p.name, ", ".join(x for x in (p.role, p.stance) if x)] for p in m.participants],
                "summary": inst.summary.text,
                "methods": [m.method, inst.summary.method, inst.provenance.text_method],
                "history": _turns(inst.history),
                "reference": _turns(inst.reference),
                "reference_unknown": unknown_speaker_turns(inst, inst.reference),
                "continuations": conts,
                "evidence": evidence.get(inst.id, {}),
            }
        )
    return index, blocks


# ----------------------------------------------------------------------------------- the page


@functools.cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and Vega-Embed in one script (vl-convert's bundle: no CDN, no network)."""
    import vl_convert as vlc

    js = vlc.javascript_bundle("window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;")
    return js.replace("</script", "<\\/script").replace("<!--", "<\\!--")


def _asset(name: str) -> str:
    return resources.files("cocoeval.analysis").joinpath("html_assets", name).read_text(encoding="utf-8")


_MD_LINK = re.compile(r"\[([^\]]*)\]\(([A-Za-z0-9_./#-]+)\)")
"""A link to a file beside the page (no scheme: nothing else becomes a link)."""


def _inline(text: str) -> str:
    """The Markdown the report's index uses inside a line (bold, code, links to the files beside)."""
    s = html.escape(text, quote=True)
    s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return _MD_LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', s)


def markdown_html(lines: Iterable[str]) -> str:
    """A small Markdown subset (headings, lists, tables, paragraphs) of the report's own text (a
    section's lines and the opening lines as ``report_doc`` renders them); every character of the text is
    escaped first."""
    out: list[str] = []
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if items:
            out.append("<ul>" + "".join(f"<li>{x}</li>" for x in items) + "</ul>")
            items.clear()
        if table:
            rows = [r for r in table if not all(set(c.strip()) <= set("-: ") for c in r)]
            head, *body = rows
            out.append(
                '<table class="cc-table"><thead><tr>'
                + "".join(f"<th>{_inline(c)}</th>" for c in head)
                + "</tr></thead><tbody>"
                + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                + "</tbody></table>"
            )
            table.clear()

    for block in lines:
        for line in block.split("\n"):
            st = line.strip()
            if st.startswith("|") and st.endswith("|"):
                if items:
                    flush()
                table.append([c.strip() for c in st.strip("|").split("|")])
                continue
            if table:
                flush()
            if st.startswith("- ") or re.match(r"^\d+\. ", st):
                items.append(_inline(st.split(" ", 1)[1]))
            elif st.startswith("#"):
                flush()
                level = min(6, len(st) - len(st.lstrip("#")) + 1)
                out.append(f"<h{level}>{_inline(st.lstrip('#').strip())}</h{level}>")
            elif st:
                flush()
                out.append(f"<p>{_inline(st)}</p>")
            else:
                flush()
    flush()
    return "\n".join(out)


def _table_data(df: pl.DataFrame) -> dict[str, Any]:
    return {"columns": df.columns, "rows": [[_clean(v) for v in row] for row in df.iter_rows()]}


def _provenance(run: RunLike) -> dict[str, Any]:
    m = run.manifest
    return {
        "cocoeval_version (run)": m.cocoeval_version,
        "cocoeval_version (report)": cocoeval.__version__,
        "git_revision": m.git_revision,
        "params_file": None if m.params_file is None else portable_path(m.params_file, Path.cwd()),
        "label": m.params.label,
        "status": m.status,
        "started": m.started,
        "finished": m.finished,
        "instances": m.instances,
        "stages": m.stages,
        "setups (name: id)": m.setups,
        "judges (name: kind: id)": m.judges,
        "imported": portable_record(m.imported, Path.cwd()) or None,
        "taxonomy": m.taxonomy or None,
        "prompts": m.prompts or None,
        "llm_mode": m.llm_mode,
        "params": portable_record(m.params.model_dump(mode="json"), Path.cwd()),  # an older manifest's too
    }


def headline_html(h: hl.Headline) -> str:
    """The headline (``headline.Headline``) as the page's first screen: what was compared, the
    leaderboard's top rows (each leads to its conversations in the viewer), the judge's
    validation, the invalid share and a link to the viewer; every text escaped."""
    e = html.escape
    rows = ""
    if h.leaders:
        body = "".join(
            f'<tr data-setup="{e(r.setup)}"><td class="num">{r.rank}</td><td>{e(r.setup)}</td>'
            f'<td class="num">{hl.number(r.distance)}</td><td class="num">{hl.interval(r.ci_low, r.ci_high)}</td>'
            f'<td class="num">{hl.ranks(r)}</td><td class="num">{r.n}</td>'
            f'<td><a href="#cc-viewer" class="cc-goto" data-setup="{e(r.setup)}" data-judge="{e(h.judge or "")}">'
            "conversations</a></td></tr>"
            for r in h.leaders
        )
        if h.floor is not None:
            body += (
                f'<tr class="cc-floor"><td>–</td><td>floor (two halves of the humans)</td><td class="num">'
                f'{hl.number(h.floor[0])}</td><td class="num">{hl.interval(h.floor[1], h.floor[2])}</td>'
                "<td>–</td><td>–</td><td></td></tr>"
            )
        rows = (
            f"<p><b>Closest to the humans</b> (judge {e(h.judge or '')}; the {len(h.leaders)} best of {h.ranked} "
            "ranked; distance to the humans with its 95% CI; rank interval: the ranks the data support; beyond the paper: the leaderboard):</p>"
            '<table class="cc-table" id="cc-leaders"><thead><tr><th>rank</th><th>setup</th><th>distance</th>'
            "<th>95% CI</th><th>rank interval</th><th>n</th><th></th></tr></thead><tbody>" + body + "</tbody></table>"
        )
    else:
        rows = f"<p><b>Leaderboard</b>: {_inline(h.not_ranked or 'no setup is ranked.')}</p>"
    return (
        f'<section id="cc-headline"><h2>{e(hl.TITLE)}</h2>'
        f"<p><b>Compared</b>: {e(hl.compared(h))}</p>{rows}"
        f"<p><b>Judge</b>: {e(hl.validation_words(h))}</p>"
        f"<p><b>Invalid</b>: {e(hl.invalid_words(h))}</p>"
        '<p><b>Conversations</b>: <a href="#cc-viewer" id="cc-to-viewer">the conversation viewer</a> below: every '
        "instance's human reference beside the setups' continuations, aligned by turn; search by text and speaker, "
        "filters by behaviour, judge score and dataset.</p></section>"
    )


def render_html(
    run: RunLike,
    f: Frames,
    out_dir: str | Path,
    doc: ReportDoc,
    figures: dict[str, tuple[list[Path], str]],
    tables: dict[str, tuple[pl.DataFrame, str]],
    *,
    judge: str | None,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """``index.html`` beside what ``report.write_report`` (or ``runcompare_report``) wrote, laid out
    from the document ``doc`` as ``index.md`` is (``report_doc.render_markdown``): the notices
    first, then the headline (``headline_html``; none for a comparison), then each section with its
    text (the same lines as index.md's, their Markdown converted) and the figures and tables it
    lists; the paper-coverage section collapsed. ``figures`` and ``tables``: the data the page
    embeds, by name. ``provenance``: shown instead of the run's manifest (a comparison shows
    several runs through one merged viewer run)."""
    return write_html(
        run,
        f,
        out_dir,
        title=title_line(doc),  # as index.md's first line says it
        figures=figures,
        tables=tables,
        sections=[(s.title, markdown_html(section_lines(s)), [x.name for x in s.listed]) for s in doc.sections],
        intro=intro_lines(doc),
        judge=judge,
        pipeline_check=doc.pipeline_check,
        provenance=provenance,
        headline=doc.headline,
    )


def write_html(
    run: RunLike,
    f: Frames,
    out_dir: str | Path,
    *,
    title: str,
    figures: dict[str, tuple[list[Path], str]],
    tables: dict[str, tuple[pl.DataFrame, str]],
    sections: Sequence[tuple[str, str, Sequence[str]]],
    intro: Sequence[str],
    judge: str | None,
    pipeline_check: bool,
    provenance: dict[str, Any] | None = None,
    headline: hl.Headline | None = None,
) -> Path:
    """Write ``out_dir/index.html`` from what ``report.write_report`` wrote: its figures (the
    Vega-Lite spec beside each, ``charts.save``), its tables and their captions, grouped into
    ``sections`` (title, their text as HTML, the names they list) as index.md groups them, with
    ``intro`` (index.md's opening lines, Markdown) and ``headline`` (``headline_html``) above;
    ``provenance``: shown instead of the run's manifest. Returns the path."""
    out = Path(out_dir)
    figs = []
    for name, (paths, what) in figures.items():
        spec_file = paths[0].parent / f"{paths[0].stem}.vl.json" if paths else None
        if spec_file is None or not spec_file.exists():
            continue
        figs.append({"name": name, "what": what, "spec": json.loads(spec_file.read_text(encoding="utf-8"))})
    index, blocks = payload(run, f)
    data = {
        "title": title,
        "judge": judge,
        "pipeline_check": pipeline_check,
        "figures": figs,
        "tables": [{"name": k, "what": w, **_table_data(df)} for k, (df, w) in tables.items()],
        "sections": [{"title": t, "names": list(ns), "collapsed": t == COVERAGE_TITLE} for t, _, ns in sections],
        "provenance": _provenance(run) if provenance is None else provenance,
        "viewer": index,
    }
    conv = "\n".join(
        f'<script type="{BLOCK_TYPE}" class="cc-conv" data-i="{n}">{pack(b)}</script>' for n, b in enumerate(blocks)
    )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        # nothing may load from outside this file: no network, no other file
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:; font-src data:\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_asset('report.css')}</style>\n</head>\n<body>\n"
        f"<header><h1>{html.escape(title)}</h1></header>\n"
        f'<section id="cc-intro">{markdown_html(intro)}</section>\n'
        + (headline_html(headline) + "\n" if headline is not None else "")
        + '<nav id="cc-nav"></nav><main id="cc-main"></main>\n'
        + "".join(f'<template class="cc-sectext">{t}</template>\n' for _, t, _ in sections)
        + f'<script type="application/json" id="cc-data">{script_json(data)}</script>\n{conv}\n'
        f"<script>{javascript_bundle()}</script>\n<script>{_asset('report.js')}</script>\n</body></html>\n"
    )
    path = out / "index.html"
    write_atomic(path, page)
    return path
