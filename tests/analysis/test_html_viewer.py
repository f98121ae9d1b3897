"""The HTML report's first screen and its viewer (issue #47 items 1 and 2), written through
``cocoeval report RUN --out DIR --html`` and opened in the real browser (Debian's chromium via
Playwright) from ``file://`` with every other request refused: the headline is on the first screen
at 1280×800 and the paper-coverage table follows it, folded; the viewer numbers the turns and
aligns the targets' turns by number, marks unknown speakers, searches by text and speaker,
filters by dataset, behaviour and judge score, and leaderboard rows, the headline's leaders and
setup points of the charts lead to the conversations; an anchor jumped to is not hidden by the
sticky navigation; no tooltip shows ``null``; hostile text stays text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.headline import TITLE
from cocoeval.cli import main
from cocoeval.core.schema import Turn

from ..sim_helpers import write_run_dir
from .test_html_report import EVIL, EVIL_NAME, _browser, hostile_run, shown
from .test_report_same import paper_scale
from .test_stats import overall

UNKNOWN = "Narrator"


def viewer_run(n: int = 12):
    """``hostile_run`` with a second dataset (instances 6–11: "e"), a turn of setup sim said by a
    speaker who is not a participant (instance 2, turn 2), and overall judgments of sim whose
    consistency runs 2..7 over the instances."""
    run = hostile_run(n)
    run.instances = [i.model_copy(update={"dataset": "e"}) if k >= n // 2 else i for k, i in enumerate(run.instances)]
    sims = run.continuations["sim"]
    t = sims[2].turns
    sims[2] = sims[2].model_copy(update={"turns": [t[0], Turn(speaker=UNKNOWN, text="and then it rained"), *t[2:]]})
    run.judgments["J"] += [overall(i.id, "sim", "J", 2 + k % 6, 5) for k, i in enumerate(run.instances)]
    return run


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, object]:
    """The viewer's run and a small run of the paper's shape (ranked setups), each reported with
    its HTML page through the CLI."""
    tmp = tmp_path_factory.mktemp("viewer")
    run = viewer_run()
    write_run_dir(tmp / "run", run, {"status": "complete", "setups": {"sim3": "sim3-v2"}})
    assert main(["report", str(tmp / "run"), "--out", str(tmp / "rep"), "--resamples", "100", "--html"]) == 0
    paper_scale().write_paper_run(tmp / "paper", per_dataset=11, chats=3, turns_n=8)
    assert main(["report", str(tmp / "paper"), "--out", str(tmp / "prep"), "--resamples", "100", "--html"]) == 0
    return {"run": run, "page": tmp / "rep" / "index.html", "paper": tmp / "prep" / "index.html"}


class Browser:
    """A page of the report opened from file:// with every other request refused; the errors,
    dialogs and refused requests are kept and asserted empty on close."""

    def __init__(self, p, path: Path, viewport=(1280, 800)):
        chromium, args = _browser()
        self.url = path.resolve().as_uri()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.dialogs: list[str] = []
        self.browser = p.chromium.launch(executable_path=chromium, args=args)
        page = self.browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

        def route(r):
            if r.request.url == self.url:
                r.continue_()
            else:
                self.outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto(self.url)
        page.wait_for_selector("body[data-ready]", state="attached", timeout=60_000)
        self.page = page

    def close(self) -> None:
        page = self.page
        assert page.evaluate("window.pwned") is None and not self.dialogs
        assert page.evaluate("window.ccErrors") == []
        self.browser.close()
        assert self.outside == [], self.outside
        assert self.errors == [], self.errors


def test_the_markdown_index_leads_with_the_headline_and_the_coverage_follows(pages):
    md = (Path(pages["paper"]).parent / "index.md").read_text(encoding="utf-8")
    assert md.index(f"## {TITLE}") < md.index("## What this run does not contain of the paper")
    assert md.index("## What this run does not contain of the paper") < md.index("## Judge-free statistics")
    glance = md.split(f"## {TITLE}", 1)[1].split("\n## ", 1)[0]
    for words in (
        "**Compared**: 19 setup(s)",
        "**Closest to the humans** (judge o4-mini; the 5 best of ",
        "**Judge**: ",
        "**Invalid**: ",
        "[the conversation viewer of index.html](index.html#cc-viewer)",
    ):
        assert words in glance
    # the rows are the leaderboard's best five, in rank order, with their intervals and rank intervals
    board = [r.split(",") for r in (Path(pages["paper"]).parent / "leaderboard.csv").read_text().splitlines()]
    head = board[0]
    ranked = sorted(
        (r for r in board[1:] if r[head.index("judge")] == "o4-mini" and r[head.index("rank")]),
        key=lambda r: (int(r[head.index("rank")]), float(r[head.index("distance")])),
    )
    rows = [x for x in glance.splitlines() if x.startswith("| ") and x[2].isdigit()]
    assert [x.split(" | ")[1] for x in rows] == [r[head.index("setup")] for r in ranked[:5]]
    first = ranked[0]
    lo, hi = float(first[head.index("ci_low")]), float(first[head.index("ci_high")])
    assert f"| {lo:.3f}–{hi:.3f} |" in rows[0]
    rl, rh = first[head.index("rank_low")], first[head.index("rank_high")]
    assert f"| {rl if rl == rh else f'{rl}–{rh}'} |" in rows[0]


@pytest.mark.timeout(300)
def test_the_first_screen_answers_and_its_links_lead_to_the_conversations(pages):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = Browser(p, pages["paper"])
        page = b.page
        try:
            box = page.locator("#cc-headline").bounding_box()
            assert box is not None and box["y"] + box["height"] <= 800  # the whole headline without scrolling
            text = page.locator("#cc-headline").inner_text()
            assert "Compared: 19 setup(s)" in text and "Closest to the humans" in text
            assert "o4-mini is NOT validated for" in text and "Invalid: " in text
            assert page.locator("#cc-leaders tbody tr[data-setup]").count() == 5
            # the coverage table follows, folded
            cov = page.locator("details.cc-collapsed")
            assert cov.count() == 1 and cov.get_attribute("open") is None
            assert not page.locator("details.cc-collapsed table").is_visible()
            # a leader's "conversations" link: that setup alone beside the humans, in the viewer
            leader = page.locator("#cc-leaders tbody tr[data-setup]").first.get_attribute("data-setup")
            page.locator("#cc-leaders a.cc-goto").first.click()
            page.wait_for_selector(f'#cc-behind .cc-behind[data-setup="{leader}"]', state="attached")
            checked = page.locator("#cc-setups input:checked").evaluate_all("els => els.map(e => e.value)")
            assert checked == [leader]
            page.wait_for_selector(f'#cc-view .cc-head[data-target="{leader}"]', state="attached")
            # a row of the leaderboard table leads there too
            page.locator('[data-name="leaderboard"] summary').click()
            row_link = page.locator('[data-name="leaderboard"] a.cc-goto').nth(2)
            other = row_link.get_attribute("data-setup")
            row_link.click()
            page.wait_for_selector(f'#cc-behind .cc-behind[data-setup="{other}"]', state="attached")
            # and a setup's point of the judge-free classifier test (detectability)
            page.wait_for_selector("body[data-charts=done]", state="attached", timeout=60_000)
            point = page.locator('[data-figure="detectability"] path[aria-roledescription="point"]').first
            label = point.get_attribute("aria-label") or ""
            target = label.split("target: ", 1)[1].split(";", 1)[0]
            point.click()
            page.wait_for_selector(f'#cc-behind .cc-behind[data-setup="{target}"]', state="attached")
            # an anchor of the navigation: its heading below the sticky navigation, not under it
            for name in ("Conversation viewer", "Provenance"):
                page.locator("#cc-nav a", has_text=name).click()
                page.wait_for_timeout(300)
                nav = page.locator("#cc-nav").bounding_box()
                head = page.locator("section h2", has_text=name).first.bounding_box()
                assert nav is not None and head is not None
                assert head["y"] >= nav["y"] + nav["height"] - 1, (name, head, nav)
            # no tooltip of any chart shows null
            labels = page.locator(".cc-chart [aria-label]").evaluate_all(
                "els => els.map(e => e.getAttribute('aria-label'))"
            )
            assert labels and [x for x in labels if "null" in x] == []
        finally:
            b.close()


@pytest.mark.timeout(300)
def test_the_viewer_numbers_aligns_marks_searches_and_filters(pages):
    from playwright.sync_api import sync_playwright

    run = pages["run"]
    with sync_playwright() as p:
        b = Browser(p, pages["page"], viewport=(1280, 900))
        page = b.page
        try:
            # turn numbers, and the targets' turns aligned by number
            page.select_option("#cc-instance", label=run.instances[2].id)
            shown(page, run.instances[2].id)
            nums = page.locator("#cc-view .cc-num[data-turn]").all_inner_texts()
            assert nums == [f"#{i + 1}" for i in range(len(run.instances[2].reference))]
            for i in range(len(nums)):
                tops = page.locator(f'#cc-view .cc-turn[data-turn="{i}"]').evaluate_all(
                    "els => els.map(e => Math.round(e.getBoundingClientRect().top))"
                )
                assert len(tops) == 2 and len(set(tops)) == 1, (i, tops)  # the humans and sim on one row
            # the speaker who is not a participant is marked, the others are not
            marked = page.locator("#cc-view .cc-turn.cc-unknown")
            assert marked.count() == 1
            assert marked.get_attribute("data-target") == "sim" and marked.get_attribute("data-turn") == "1"
            assert "unknown speaker" in marked.inner_text() and UNKNOWN in marked.inner_text()

            # search by text: every turn of the references and the chosen setups (sim, sim2) holding it
            def expected(text: str, speaker: str = "") -> list[tuple[str, str, int]]:
                out = []
                for inst in sorted(run.instances, key=lambda i: i.id):
                    cols = [("reference", inst.reference)]
                    for s in ("sim", "sim2"):
                        c = next((c for c in run.continuations[s] if c.instance_id == inst.id), None)
                        if c is not None and c.status == "ok":
                            cols.append((s, c.turns))
                    for target, turns in cols:
                        out += [
                            (inst.id, target, k)
                            for k, t in enumerate(turns)
                            if text.lower() in t.text.lower() and speaker.lower() in t.speaker.lower()
                        ]
                return out

            def search(text: str, speaker: str = "") -> list[tuple[str, str, int]]:
                page.fill("#cc-search", text)
                page.fill("#cc-speaker", speaker)
                page.evaluate("document.getElementById('cc-found').removeAttribute('data-found')")
                page.click("#cc-search-go")
                page.wait_for_selector("#cc-found[data-found]", state="attached")
                return [
                    (
                        li.get_attribute("data-instance"),
                        li.get_attribute("data-target"),
                        int(li.get_attribute("data-turn")),
                    )
                    for li in page.locator("#cc-found li").all()
                ]

            got = search("utterance 3 of")
            assert got == expected("utterance 3 of") and len(got) > 12
            assert search("utterance 3 of", "alice") == expected("utterance 3 of", "alice")
            assert search("", UNKNOWN.lower()) == [(run.instances[2].id, "sim", 1)]
            # hostile text is found as text and shown as text
            evil = search("<script>window.pwned=1")
            assert evil == expected("<script>window.pwned=1") and evil
            page.locator("#cc-found li a").first.click()
            shown(page, evil[0][0])
            focus = page.locator("#cc-view .cc-turn.cc-focus")
            assert focus.count() == 1 and EVIL in focus.inner_text()
            assert page.locator("#cc-view .cc-turn.cc-found-hit").count() >= 1

            # filters: dataset
            page.select_option("#cc-dataset", "e")
            ids = page.locator("#cc-instance option").all_inner_texts()
            assert ids == sorted(i.id for i in run.instances if i.dataset == "e")
            page.select_option("#cc-dataset", "(all)")
            # judge score: sim's consistency from 6 to 7 (the chosen setups' overall judgments by J)
            page.select_option("#cc-score", "0")
            page.fill("#cc-score-min", "6")
            page.fill("#cc-score-max", "7")
            page.locator("#cc-score-max").dispatch_event("change")
            f = run_frames(run)
            want = sorted(
                f.likert.filter(
                    (f.likert["target"] == "sim") & (f.likert["consistency"] >= 6) & (f.likert["consistency"] <= 7)
                )["instance_id"].to_list()
            )
            assert page.locator("#cc-instance option").all_inner_texts() == want and want
            page.select_option("#cc-score", "(all)")
            assert page.locator("#cc-instance option").count() == len(run.instances)
            # behaviour: the instances where the humans or a chosen setup has a repetition
            page.select_option("#cc-behaviour", "off_topic")
            shown(page, "")
            page.select_option("#cc-behaviour", "repetition")
            assert page.locator("#cc-instance option").count() == len(run.instances)
            # the hostile names stay text
            page.select_option("#cc-instance", label=run.instances[0].id)
            shown(page, run.instances[0].id)
            assert EVIL_NAME in (page.locator("#cc-view details").text_content() or "")
        finally:
            b.close()


def test_no_tooltip_of_a_chart_of_the_report_can_show_null(pages):
    """Every tooltip field of every figure's spec has a value in every row of the data (a text
    column with "–" where a statistic is undefined: ``charts.null_free``)."""

    def walk(node, fields, data):
        if isinstance(node, dict):
            enc = node.get("encoding")
            if isinstance(enc, dict) and "tooltip" in enc:
                tips = enc["tooltip"] if isinstance(enc["tooltip"], list) else [enc["tooltip"]]
                fields |= {t["field"] for t in tips if isinstance(t, dict) and "field" in t}
            if isinstance(node.get("values"), list):
                data.append(node["values"])
            for v in node.values():
                walk(v, fields, data)
        elif isinstance(node, list):
            for v in node:
                walk(v, fields, data)

    specs = [*Path(pages["paper"]).parent.glob("*.vl.json"), *Path(pages["page"]).parent.glob("*.vl.json")]
    names = {p.stem.removesuffix(".vl") for p in specs}
    assert {"leaderboard", "paired", "detectability", "table12", "convstats_vs_human"} <= names
    bad = {}
    for path in specs:
        spec = json.loads(path.read_text(encoding="utf-8"))
        fields: set[str] = set()
        data: list[list] = [*spec.get("datasets", {}).values()]
        walk(spec, fields, data)
        nulls = sorted(
            {f for rows in data for r in rows if isinstance(r, dict) for f in fields if f in r and r[f] is None}
        )
        if nulls:
            bad[path.name] = nulls
    assert bad == {}
