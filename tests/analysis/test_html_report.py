"""The self-contained HTML report (``cocoeval report RUN --out DIR --html``): the file itself
(escaping, no reference to anything outside it) and, in the real browser (Debian's chromium via
Playwright, as ``tests/notebooks/test_browser.py``), opened from ``file://`` with every request
outside the file refused: every chart renders, no console error, a bar click lists the turns
behind it (the notebooks' viewer's own count), filters update the viewer and clear that list."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from cocoeval.analysis import html_report
from cocoeval.analysis.charts import HUMAN
from cocoeval.cli import main
from cocoeval.core.schema import Continuation, Turn, TurnLabel

from ..conftest import ROOT
from ..sim_helpers import write_run_dir
from .test_stats import make_run

# the widgets' hostile cases, and ones aimed at a page that embeds JSON in <script> elements
EVIL = '<script>window.pwned=1</script></script><img src=x onerror="window.pwned=2">'
EVIL_NAME = "Mallory <b>&amp;</b>"
EVIL_EVIDENCE = '"><script>window.pwned=3</script> \u2028 <!--'


def hostile_run(n: int = 12):
    """``make_run(n)`` with hostile text in a history turn, a speaker's name, a continuation's
    turn and a judge's evidence; setup 'sim3' simulated the first instance only (ok, unjudged)."""
    run = make_run(n)
    inst = run.instances[0]
    run.instances[0] = inst.model_copy(update={"history": [Turn(speaker=EVIL_NAME, text=EVIL), *inst.history[1:]]})
    sims = run.continuations["sim"]
    sims[1] = sims[1].model_copy(
        update={"turns": [Turn(speaker=sims[1].turns[0].speaker, text=EVIL), *sims[1].turns[1:]]}
    )
    js = run.judgments["J"]
    for k, j in enumerate(js):
        if j.kind == "fine_grained" and j.target == "sim" and j.instance_id == run.instances[1].id:
            labels = [
                TurnLabel(turn=lb.turn, behaviours=lb.behaviours, evidence={b: EVIL_EVIDENCE for b in lb.behaviours})
                for lb in j.labels
            ]
            js[k] = j.model_copy(update={"labels": labels})
    run.continuations["sim3"] = [
        Continuation(instance_id=run.instances[0].id, setup_id="sim3", turns=run.instances[0].reference)
    ]
    return run


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, object]:
    tmp = tmp_path_factory.mktemp("html")
    run = hostile_run()
    # sim3's continuation was made with other settings than the manifest's: stale
    write_run_dir(
        tmp / "run", run, {"status": "complete", "params": {"label": "pipeline-check"}, "setups": {"sim3": "sim3-v2"}}
    )
    assert main(["report", str(tmp / "run"), "--out", str(tmp / "rep"), "--resamples", "100", "--html"]) == 0
    return tmp / "rep" / "index.html", run


def test_the_file_is_self_contained_and_escapes_every_text(report):
    page, _ = report
    text = page.read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b[^>]*>", text)
    # the data block, one block per instance, the Vega bundle and the report's script: nothing else
    assert len(scripts) == 1 + 12 + 2
    assert all("src=" not in s for s in scripts) and "<link" not in text
    assert EVIL not in text and "window.pwned=1</script>" not in text and EVIL_EVIDENCE not in text
    index = re.search(r'<script type="application/json" id="cc-data">(.*?)</script>', text, flags=re.S)
    assert index and "<" not in index.group(1) and ">" not in index.group(1)  # escaped: \\u003c
    blocks = re.findall(
        r'<script type="application/gzip\+base64" class="cc-conv" data-i="(\d+)">([^<]*)</script>', text
    )
    assert [int(n) for n, _ in blocks] == list(range(12))
    first = html_report.unpack(blocks[0][1])  # instances in id order: d/c0/0 first
    assert first["id"] == "d/c0/0" and first["history"][0] == [EVIL_NAME, EVIL]
    assert "http://" not in text.split("<script>", 1)[0]  # head and intro: no remote resource
    assert "pipeline check" in text


def test_the_marks_read_as_in_the_notebooks():
    assert html_report.continuation_note("invalid", "x") == "invalid: x"
    assert (
        html_report.continuation_note("stale", "simulated with other setup settings")
        == "stale: simulated with other setup settings"
    )
    assert html_report.continuation_note("ok", None) is None
    assert html_report.judgment_note("skipped", "no turns to judge") == "judgment skipped: no turns to judge"
    assert html_report.judgment_note("repaired", "r") is None
    assert html_report.not_simulated_line(["a", "b"]) == "not simulated here: a, b"
    assert html_report.not_simulated_line([]) is None


def shown(page, iid: str) -> None:
    """Wait until the viewer shows instance ``iid`` ("": no instance matches)."""
    page.wait_for_selector(f'#cc-view[data-instance="{iid}"]', state="attached", timeout=10_000)


def _browser():
    from tests.notebooks.test_browser import CHROMIUM_ARGS, _chromium

    return _chromium(), CHROMIUM_ARGS


@pytest.mark.timeout(300)
def test_in_the_browser_from_file(report):
    from playwright.sync_api import sync_playwright

    from cocoeval.notebooks.widgets import ConversationViewer
    from cocoeval.run import Run

    chromium, args = _browser()
    page_path, run = report
    url = page_path.resolve().as_uri()
    errors: list[str] = []
    outside: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            def route(r):
                if r.request.url == url:
                    r.continue_()
                else:  # nothing but the file itself: no network, no other file
                    outside.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(url)
            page.wait_for_selector("body[data-charts=done]", state="attached", timeout=60_000)
            figures = page.locator(".cc-chart")
            assert figures.count() >= 5
            assert page.locator(".cc-chart[data-rendered] svg").count() == figures.count()
            assert page.locator(".cc-tabledetails").count() >= 10
            assert page.locator('[data-name="invalid_rates"] table').count() == 1  # open: the invalid accounting
            assert page.evaluate("window.pwned") is None and not dialogs
            # the hostile history turn is text on the page
            page.select_option("#cc-instance", label=run.instances[0].id)
            shown(page, run.instances[0].id)
            assert EVIL in (page.locator("#cc-view details").text_content() or "")
            assert EVIL_NAME in (page.locator("#cc-view details").text_content() or "")
            # setups without a continuation of the instance fold into one line
            page.locator('#cc-setups input[value="sim3"]').check()
            page.select_option("#cc-instance", label=run.instances[2].id)
            shown(page, run.instances[2].id)
            assert (
                page.locator(".cc-fold").inner_text() == "not simulated here: sim2, sim3"
            )  # sim2: instances 0 and 1 only
            assert page.locator('.cc-head[data-target="sim3"]').count() == 0
            # invalid and stale read as in the notebooks' viewer (the same words, from html_report)
            nb = ConversationViewer(Run.open(page_path.parent.parent / "run"), judge="J")
            nb.setups.value = ("sim", "sim2", "sim3")
            for k, target, words in (
                (0, "sim3", "stale: simulated with other setup settings"),
                (0, "sim2", "judgment invalid: bad"),
                (1, "sim2", "invalid: x"),
            ):
                page.select_option("#cc-instance", label=run.instances[k].id)
                shown(page, run.instances[k].id)
                note = page.locator(f'.cc-head[data-target="{target}"] .cc-note').first.inner_text()
                assert note.startswith(words), note
                nb.instance.value = run.instances[k].id
                assert f'<div class="cc-note"><i>{html.escape(note)}</i></div>' in nb.html.value

            # a bar click lists the turns behind it: the same turns and n as the notebooks' viewer
            v = ConversationViewer(run, judge="J")
            want = v.bar("sim", "simulated", "repetition")
            bar = page.locator(
                '[data-figure="figure3_behaviours"] path[aria-roledescription="bar"]'
                '[aria-label*="series: simulated"][aria-label*="behaviour: Repetition;"]'
            )
            assert bar.count() == 1
            bar.click()
            page.wait_for_selector("#cc-behind .cc-behind", state="attached")
            items = page.locator("#cc-behind li")
            got = [(li.get_attribute("data-instance"), int(li.get_attribute("data-turn") or -1)) for li in items.all()]
            assert got == [(r[0], r[1]) for r in want.rows] and got
            head = page.locator("#cc-behind b").first.inner_text()
            assert head == f"{len(want.rows)} turn(s) in {len(want.instances)} of {want.n} instance(s)"
            assert page.locator("#cc-behaviour").input_value() == "repetition"
            human = v.bar("sim", HUMAN, "repetition")
            page.locator(
                '[data-figure="figure3_behaviours"] path[aria-roledescription="bar"]'
                '[aria-label*="series: human reference"][aria-label*="behaviour: Repetition;"]'
            ).click()
            page.wait_for_function(f"document.querySelectorAll('#cc-behind li').length === {len(human.rows)}")
            assert items.count() == len(human.rows)
            # the evidence is on hover, as text
            sim1 = page.locator('.cc-turn[data-target="sim"] .cc-tag')
            page.select_option("#cc-instance", label=run.instances[1].id)
            shown(page, run.instances[1].id)
            assert page.locator("#cc-behind li").count() == 0  # another instance: the list is cleared
            assert sim1.first.get_attribute("title") == EVIL_EVIDENCE
            assert EVIL in "".join(page.locator('.cc-turn[data-target="sim"]').all_inner_texts())
            # a filter updates the viewer (and clears the list)
            bar.click()
            page.wait_for_function(f"document.querySelectorAll('#cc-behind li').length === {len(want.rows)}")
            page.select_option("#cc-behaviour", "off_topic")
            shown(page, "")
            assert page.locator("#cc-behind li").count() == 0
            assert page.locator("#cc-view").inner_text() == "No instance matches the filters."
            page.select_option("#cc-behaviour", "repetition")
            assert page.locator("#cc-instance option").count() == len(run.instances)
            # words in the tooltips, never a field name with a null
            labels = page.locator('[data-figure="figure3_behaviours"] path[aria-label]').evaluate_all(
                "els => els.map(e => e.getAttribute('aria-label'))"
            )
            assert any("interval: 95% CI" in a for a in labels) and not any("ci_low" in a for a in labels)
            assert page.evaluate("window.pwned") is None and not dialogs
            assert page.evaluate("window.ccErrors") == []
            shots = Path(os.environ.get("COCOEVAL_ARTIFACTS") or ROOT / "out") / "browser"
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "html_report_viewer.png"))
        finally:
            browser.close()
    assert outside == [], f"requests outside the file: {outside}"
    assert errors == [], errors


def test_the_html_viewer_shows_the_counted_judgment_where_a_stale_one_shares_its_key():
    """A setup simulated again keeps its old judgment, now stale, beside the new one under the same
    setup name: the HTML report's viewer shows the counted one with its labels, as the notebooks'
    viewer and the statistics do (``verdicts``), even when the stale one comes last in the file."""
    from cocoeval.analysis.frames import run_frames
    from cocoeval.analysis.verdicts import verdicts

    from .test_stats import fine

    run = make_run(3)
    first = run.continuations["sim"][0]
    run.continuations["sim"][0] = first.model_copy(update={"setup_id": "sim-v2"})  # simulated again
    new = fine(first.instance_id, "sim-v2", "J", [["off_topic"], [], [], []]).model_copy(update={"target_name": "sim"})
    js = run.judgments["J"]
    old = next(k for k, j in enumerate(js) if j.instance_id == first.instance_id and j.target == "sim")
    run.judgments["J"] = [*js[:old], new, *js[old:]]  # the stale one after the counted one
    f = run_frames(run)
    rows = f.judgments.filter(kind="fine_grained", target="sim", instance_id=first.instance_id)
    assert rows["status"].to_list() == ["ok", "stale"]
    index, blocks = html_report.payload(run, f)
    at = str([b["id"] for b in blocks].index(first.instance_id))
    entry = index["judgments"]["J"]["sim"][at]
    assert entry["s"] == "ok" and entry["l"] == {"0": ["off_topic"]}
    v = verdicts(f)[("J", first.instance_id, "sim")]
    assert v.status == entry["s"] and {str(t): bs for t, (bs, _) in v.labels.items()} == entry["l"]
