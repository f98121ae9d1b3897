"""The report as one typed document (``report_doc.ReportDoc``): index.md (``render_markdown``) and
index.html (``html_report.render_html``) are both rendered from it, so what a document holds is
what both pages show."""

from __future__ import annotations

import html
import json
import re

import polars as pl

from cocoeval.analysis import html_report
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.headline import Headline, Share
from cocoeval.analysis.report_doc import (
    JudgeBased,
    Listed,
    ReportDoc,
    Section,
    Settings,
    SetupSource,
    Text,
    render_markdown,
)

from .test_stats import make_run


def _doc(*sections: Section) -> ReportDoc:
    head = Headline(
        setups=("sim",),
        judges=("J",),
        judge="J",
        datasets=(("d", 3),),
        instances=3,
        conversations=3,
        leaders=(),
        ranked=0,
        floor=None,
        not_ranked=None,
        validated=None,
        behaviours=10,
        validation_why=None,
        continuations=Share(0, 3),
        judgments=Share(0, 6),
        pipeline_check=False,
    )
    return ReportDoc(
        title="r", notices=("a stray file",), pipeline_check=False, headline=head, with_html=True, sections=sections
    )


def _page_parts(text: str) -> tuple[list[dict[str, object]], list[str]]:
    data = re.search(r'<script type="application/json" id="cc-data">(.*?)</script>', text, flags=re.S)
    assert data
    texts = re.findall(r'<template class="cc-sectext">(.*?)</template>', text, flags=re.S)
    return json.loads(data.group(1))["sections"], texts


def test_a_section_added_to_the_report_document_appears_in_both_index_md_and_index_html(tmp_path):
    run = make_run(3)
    f = run_frames(run)
    df = pl.DataFrame({"x": [1, 2]})
    df.write_csv(tmp_path / "extra.csv")
    extra = Section(
        Text("An added section", ("It says **this** with `code`.", "- one item", "")),
        (Listed("extra", "table", "An added table", ("extra.csv", "extra.md"), 2),),
    )
    base = (
        Section(Settings(100, 0, 10, (SetupSource("imp", "imported", file="c.jsonl", sha256="ab", model="m"),))),
        Section(JudgeBased("J", (), "bh", None), marked=True),
    )
    before, after = _doc(*base), _doc(*base, extra)

    md = render_markdown(after)
    assert md.startswith(render_markdown(before))  # the added section is rendered after the others, nothing else moves
    assert md[len(render_markdown(before)) :] == (
        "## An added section\n\nIt says **this** with `code`.\n- one item\n\n"
        "Tables:\n\n- **extra**: An added table — [extra.csv](extra.csv), [extra.md](extra.md) (2 rows)\n\n"
    )

    page = html_report.render_html(run, f, tmp_path, after, {}, {"extra": (df, "An added table")}, judge="J")
    sections, texts = _page_parts(page.read_text(encoding="utf-8"))
    # the same sections, in the same order, with the same titles and listings as index.md
    assert [s["title"] for s in sections] == [
        "Settings and sources",
        "Judge-based statistics — pipeline check — tiny model, not results",
        "An added section",
    ]
    assert [s["title"] for s in sections] == re.findall(r"^## (.+)$", md, flags=re.M)[1:]  # after "At a glance"
    assert sections[-1]["names"] == ["extra"] and sections[0]["names"] == sections[1]["names"] == []
    # and the same sentences, their inline Markdown converted
    assert texts[-1] == "<p>It says <b>this</b> with <code>code</code>.</p>\n<ul><li>one item</li></ul>"
    assert "<code>imp</code>: imported from <code>c.jsonl</code> (sha256 ab), written by m" in texts[0]
    assert "Judge shown in the figures: J." in texts[1] and "Judge shown in the figures: J." in md
    intro = re.search(r'<section id="cc-intro">(.*?)</section>', page.read_text(encoding="utf-8"), flags=re.S)
    assert intro and "<li>a stray file</li>" in intro.group(1) and "- a stray file" in md
    assert html.escape("Report for r") in page.read_text(encoding="utf-8") and md.startswith("# Report for r\n")


def test_a_comparison_document_has_no_headline_and_every_line_of_its_sections_on_both_pages(tmp_path):
    run = make_run(3)
    f = run_frames(run)
    doc = ReportDoc(
        title="v1, v2",
        notices=(),
        pipeline_check=True,
        headline=None,
        with_html=True,
        sections=(Section(Text("What was compared", ("- **Shared instances**: 3 of them.", "- **Judge**: `j`.", ""))),),
        compared=True,
    )
    md = render_markdown(doc)
    assert md.startswith("# Comparing runs: v1, v2\n\n_Beyond the paper: ")
    assert "A run compared is labelled `label: pipeline-check`" in md and "At a glance" not in md
    assert md.endswith("## What was compared\n\n- **Shared instances**: 3 of them.\n- **Judge**: `j`.\n\n")

    page = html_report.render_html(run, f, tmp_path, doc, {}, {}, judge="J", provenance={"compared runs": []})
    text = page.read_text(encoding="utf-8")
    sections, texts = _page_parts(text)
    # a list item that opens with a bolded name is the section's text, not something it lists
    assert sections == [{"title": "What was compared", "names": [], "collapsed": False}]
    assert texts == ["<ul><li><b>Shared instances</b>: 3 of them.</li><li><b>Judge</b>: <code>j</code>.</li></ul>"]
    assert 'id="cc-headline"' not in text and html.escape("Comparing runs: v1, v2") in text
    assert '"provenance":{"compared runs":[]}' in text  # instead of the merged viewer run's manifest
