"""The annotation page (``cocoeval annotate-export RUN --out DIR --html``): the file itself (blind,
self-contained, every text escaped) and, in the real browser (Debian's chromium via Playwright, as
``tests/analysis/test_html_report.py``), opened from ``file://`` with every other request refused:
three items annotated by clicks and keys, the progress kept across a reload, the Export button's
download imported with ``cocoeval annotate-import`` and α read in its report; hostile text in a
turn stays text."""

from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path

import pytest

from cocoeval.annotate.page import COLUMNS, PAGE, export_id
from cocoeval.cli import main
from cocoeval.core.jsonio import write_json, write_jsonl
from cocoeval.core.schema import Continuation, Turn
from cocoeval.core.taxonomy import load_taxonomy

from ..conftest import ROOT
from ..sim_helpers import instance

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2);window.pwned=1">'


def hostile_run_dir(tmp: Path) -> Path:
    """Two instances, the reference and setup simA (its turns reversed); the second reference turn
    of the first instance is hostile markup (so is simA's second turn of it)."""
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=3) for i in range(2)]
    ref = list(insts[0].reference)
    ref[1] = Turn(speaker=ref[1].speaker, text=EVIL)
    insts[0] = insts[0].model_copy(update={"reference": ref})
    d = tmp / "run"
    write_jsonl(d / "instances.jsonl", insts)
    write_jsonl(
        d / "continuations" / "simA.jsonl",
        [Continuation(instance_id=i.id, setup_id="idA", setup_name="simA", turns=i.reference[::-1]) for i in insts],
    )
    tax = load_taxonomy()
    write_json(d / "manifest.json", {"taxonomy": {"name": tax.name, "hash": tax.hash}, "judges": {}})
    return d


@pytest.fixture()
def exported(tmp_path, capsys) -> tuple[Path, Path]:
    run = hostile_run_dir(tmp_path)
    assert main(["annotate-export", str(run), "--out", str(tmp_path / "exp"), "--seed", "3", "--html"]) == 0
    assert "annotate.html: the annotation page" in capsys.readouterr().out
    return run, tmp_path / "exp"


def test_annotate_export_html_writes_one_blind_self_contained_page(exported):
    _, exp = exported
    text = (exp / PAGE).read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "<link" not in text
    assert all("src=" not in s for s in re.findall(r"<script\b[^>]*>", text))
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert EVIL not in text  # only as escaped JSON data
    data = json.loads(re.search(r'<script type="application/json" id="an-data">(.*?)</script>', text, re.S).group(1))
    assert "<" not in re.search(r'id="an-data">(.*?)</script>', text, re.S).group(1)
    # the same items, in the same order, with the same ids as the CSV export; the key is not in the page
    items_text = (exp / "items.jsonl").read_text(encoding="utf-8")
    assert data["items"] == [json.loads(x) for x in items_text.splitlines()]
    assert data["export_id"] == export_id(items_text)
    key = json.loads((exp / "key.json").read_text())
    assert [it["item_id"] for it in data["items"]] and {it["item_id"] for it in data["items"]} == set(key)
    for k in key.values():
        assert k["target_id"] not in text
    assert "simA" not in text and '"reference"' not in text and "idA" not in text
    assert data["instructions"] == (exp / "instructions.md").read_text(encoding="utf-8")
    assert [b["id"] for b in data["behaviours"]] == list(load_taxonomy().ids)
    assert tuple(data["columns"]) == COLUMNS
    assert any(t["text"] == EVIL for it in data["items"] for t in it["turns"])  # kept, as data


def _second_annotator(exp: Path, out: Path) -> Path:
    """The template filled by 'bob': Repetition on every second turn, none elsewhere, scores 6 and 7."""
    rows = list(csv.DictReader((exp / "template.csv").open(encoding="utf-8")))
    for r in rows:
        r["annotator"] = "bob"
        if r["turn"]:
            r["behaviours"] = "Repetition" if r["turn"] == "2" else "none"
        else:
            r["consistency"], r["collaborativeness"] = "6", "7"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def start(page, who: str) -> None:
    """Name the annotator and press Start (the items then show, with their work in this browser)."""
    page.locator("#an-annotator").fill(who)
    page.locator("#an-start").click()
    page.wait_for_selector("body[data-started]", state="attached")


def _browser():
    from tests.notebooks.test_browser import CHROMIUM_ARGS, _chromium

    return _chromium(), CHROMIUM_ARGS


@pytest.mark.timeout(300)
def test_the_page_in_the_browser_annotate_reload_export_import_and_alpha(exported, tmp_path, capsys):
    from playwright.sync_api import sync_playwright

    run, exp = exported
    chromium, args = _browser()
    url = (exp / PAGE).resolve().as_uri()
    errors: list[str] = []
    outside: list[str] = []
    dialogs: list[str] = []
    items = [json.loads(x) for x in (exp / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(items) == 4 and all(it["tasks"] == ["overall", "fine_grained"] for it in items)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
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
            page.wait_for_selector("body[data-ready]", state="attached")
            progress = page.locator("#an-progress")
            assert progress.inner_text() == "0 of 4 items labelled"
            # the name first: the items show after Start, and the work is kept under the name
            assert page.locator("section.an-item").count() == 0 and page.locator("#an-export").is_hidden()
            page.locator("#an-start").click()
            assert "name" in page.locator("#an-msg").inner_text()
            start(page, "alice")
            # the hostile turn is text on the page
            assert EVIL in page.locator("#an-main").inner_text()
            assert page.locator("#an-main img, #an-main script").count() == 0

            def sec(k):
                return page.locator(f'section[data-item="{items[k]["item_id"]}"]')

            # item 1 by keys: click its first turn, 1 = Repetition, n, x = no behaviour, n, 1 and 0
            sec(0).locator(".an-turn.an-ann").first.click()
            page.keyboard.press("1")
            page.keyboard.press("n")
            page.keyboard.press("x")
            page.keyboard.press("n")
            page.keyboard.press("1")
            page.keyboard.press("0")  # the tenth behaviour
            # n/p move: back to turn 2 and on again
            page.keyboard.press("p")
            assert page.evaluate("document.activeElement.dataset.turn") == "2"
            sec(0).locator("select[data-score=consistency]").select_option("7")
            sec(0).locator("select[data-score=collaborativeness]").select_option("5")
            # item 2 by clicks: Repetition on turn 2, no behaviour elsewhere, and a note
            for n, turn in enumerate(sec(1).locator(".an-turn.an-ann").all()):
                if n == 1:
                    turn.locator("input[data-behaviour=repetition]").click()
                    turn.locator("input[data-field=not_in_taxonomy]").fill('talks over, "rudely", twice')
                else:
                    turn.locator("input[data-behaviour=none]").click()
            sec(1).locator("select[data-score=consistency]").select_option("8")
            sec(1).locator("select[data-score=collaborativeness]").select_option("8")
            # item 3: keys after a click on a checkbox; digits typed into the note stay text
            turns3 = sec(2).locator(".an-turn.an-ann")
            turns3.nth(0).locator("input[data-behaviour=none]").click()
            page.keyboard.press("n")
            page.keyboard.press("x")
            page.keyboard.press("n")
            page.keyboard.press("1")
            turns3.nth(2).locator("input[data-field=not_in_taxonomy]").press_sequentially("12 x n")
            sec(2).locator("select[data-score=consistency]").select_option("3")
            sec(2).locator("select[data-score=collaborativeness]").select_option("4")
            assert progress.inner_text() == "3 of 4 items labelled"
            # item 4 begun only
            sec(3).locator(".an-turn.an-ann").first.locator("input[data-behaviour=none]").click()

            page.reload()
            page.wait_for_selector("body[data-ready]", state="attached")
            start(page, "alice")
            assert progress.inner_text() == "3 of 4 items labelled"
            assert sec(1).locator("input[data-field=not_in_taxonomy]").nth(1).input_value() == (
                'talks over, "rudely", twice'
            )
            checked = sec(0).locator(".an-turn.an-ann").nth(2).locator("input:checked")
            assert sorted(checked.evaluate_all("els => els.map(e => e.dataset.behaviour)")) == [
                "persistent_disagreement",
                "repetition",
            ]
            assert sec(2).locator(".an-turn.an-ann").nth(2).locator("input:checked").count() == 1
            assert sec(2).locator("select[data-score=consistency]").input_value() == "3"

            # the download is the sheet annotate-import reads
            with page.expect_download() as dl:
                page.locator("#an-export").click()
            sheet = tmp_path / "alice.csv"
            dl.value.save_as(sheet)
            assert "exported 10 turn(s) and 3 overall score(s)" in page.locator("#an-msg").inner_text()
            assert page.evaluate("window.pwned") is None and not dialogs
            shots = Path(os.environ.get("COCOEVAL_ARTIFACTS") or ROOT / "out") / "browser"
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "annotation_page.png"))
        finally:
            browser.close()
    assert outside == [], f"requests outside the file: {outside}"
    assert errors == [], errors

    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    assert tuple(rows[0]) == COLUMNS and len(rows) == 13
    key = str(exp / "key.json")
    assert main(["annotate-import", str(_second_annotator(exp, tmp_path / "bob.csv")), str(run), "--key", key]) == 0
    out = capsys.readouterr().out
    assert "bob: 4 of 4 items labelled" in out and "α needs two" in out
    rep = tmp_path / "rep.json"
    assert main(["annotate-import", str(sheet), str(run), "--key", key, "--report", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "annotator alice: 13 added" in out
    assert "alice: 3 of 4 items labelled, 1 begun" in out and "bob: 4 of 4 items labelled" in out
    assert "agreement so far (beyond the paper)" in out and "among 2 annotator(s), over the 10 turn(s)" in out
    m = re.search(r"Repetition: α (-?\d\.\d\d)", out)
    assert m, out
    status = json.loads(rep.read_text())["status"]
    rep_alpha = {a["behaviour"]: a for a in status["alpha"]}["repetition"]
    assert f"{rep_alpha['alpha']:.2f}" == m.group(1) and math.isfinite(rep_alpha["alpha"])
    assert {p["annotator"]: (p["labelled"], p["partly"], p["total"]) for p in status["progress"]} == {
        "alice": (3, 1, 4),
        "bob": (4, 0, 4),
    }


@pytest.mark.timeout(300)
def test_a_key_after_focus_left_the_turn_labels_nothing_and_a_second_annotator_starts_with_nothing_of_the_first(
    exported, tmp_path
):
    from playwright.sync_api import sync_playwright

    _, exp = exported
    chromium, args = _browser()
    url = (exp / PAGE).resolve().as_uri()
    errors: list[str] = []
    item = json.loads((exp / "items.jsonl").read_text(encoding="utf-8").splitlines()[0])["item_id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page(accept_downloads=True)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
            page.goto(url)
            page.wait_for_selector("body[data-ready]", state="attached")
            start(page, "alice")
            turns = page.locator(f'section[data-item="{item}"] .an-turn.an-ann')
            first = turns.nth(0)
            first.click()
            page.keyboard.press("1")
            assert first.locator("input:checked").count() == 1
            # a click elsewhere: the focus is on the body, the turn no longer current, keys label nothing
            page.locator("#an-head h1").click()
            assert page.evaluate("document.activeElement.tagName") == "BODY"
            assert "an-focus" not in (first.get_attribute("class") or "")
            for key in ("2", "3"):
                page.keyboard.press(key)
            checked = page.locator("input:checked").evaluate_all("els => els.map(e => e.dataset.behaviour)")
            assert checked == ["repetition"]
            # a note on a turn with nothing ticked is left out of the export, and counted in its message
            turns.nth(1).locator("input[data-field=not_in_taxonomy]").fill("hums")
            with page.expect_download() as dl:
                page.locator("#an-export").click()
            sheet = tmp_path / "alice.csv"
            dl.value.save_as(sheet)
            msg = page.locator("#an-msg").inner_text()
            assert "exported 1 turn(s)" in msg
            assert "1 turn(s) with a 'not in the taxonomy' note but nothing ticked left out" in msg
            # bob on the same browser profile: nothing of alice's work, nothing to export
            page.reload()
            page.wait_for_selector("body[data-ready]", state="attached")
            start(page, "bob")
            assert page.locator("#an-progress").inner_text() == "0 of 4 items labelled"
            assert page.locator("input:checked").count() == 0
            assert turns.nth(1).locator("input[data-field=not_in_taxonomy]").input_value() == ""
            page.locator("#an-export").click()
            assert "nothing labelled yet" in page.locator("#an-msg").inner_text()
            # alice again: her work is back
            page.reload()
            page.wait_for_selector("body[data-ready]", state="attached")
            start(page, "alice")
            assert first.locator("input:checked").count() == 1
            assert turns.nth(1).locator("input[data-field=not_in_taxonomy]").input_value() == "hums"
        finally:
            browser.close()
    assert errors == [], errors
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    assert [(r["annotator"], r["item_id"], r["turn"], r["behaviours"]) for r in rows] == [
        ("alice", item, "1", "repetition")
    ]
