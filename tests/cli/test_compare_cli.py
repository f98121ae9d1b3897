"""``cocoeval compare RUN_A RUN_B``, through the command line, on small runs of the mock model:
a simulator last month (run ``a``) and today (run ``b``, on a rebuilt benchmark where one meeting's
text changed under the same instance ids), compared on the shared instances under the same judge
id. The report's files, the intersection named, the instances of other content left out and
named, a changed judge id refused, disjoint runs an exit-2 error with a hint, and the numbers equal
``paired.compare_setups`` called directly on the two runs' frames put together by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest
import yaml

from cocoeval import build
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.paired import DISTANCE, compare_setups
from cocoeval.core.targets import REFERENCE
from cocoeval.run import Run

from ..conftest import write_json

SPEAKERS = ("Project Manager", "Marketing", "User Interface")
MEETINGS = 8


def meeting(i: int, n: int, word: str = "about") -> dict:
    """A QMSum meeting whose every turn names its topic (``topic<i>``): the judge's script answers by it."""
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {"speaker": SPEAKERS[j % 3], "content": f"Turn number {j} {word} topic{i} and the budget ."}
            for j in range(n)
        ],
    }


def fine(repetition: int, off_topic: int = 0) -> str:
    """A fine-grained answer for 30 turns: Repetition on the first ``repetition`` turns, Off topic
    on the last ``off_topic``."""
    turns = []
    for t in range(1, 31):
        bs = [{"behaviour": "Repetition", "evidence": "again"}] if t <= repetition else []
        if t > 30 - off_topic:
            bs.append({"behaviour": "Off topic", "evidence": "elsewhere"})
        turns.append({"turn": t, "behaviours": bs})
    return json.dumps({"turns": turns})


def judge_script() -> dict:
    """Per meeting i: the humans show 1 + i % 3 repetitions; the simulator that writes "point"
    one more, the one that writes "idea" 6 + i % 2 more (and both 1 + i % 2 turns off topic)."""
    answers = []
    for word, extra in (("idea", 6), ("point", 1)):
        for i in range(MEETINGS):
            answers.append(
                {
                    "match": word,
                    "context": f"topic{i} ",
                    "text": fine(1 + i % 3 + extra + (i % 2) * (word == "idea"), 1 + i % 2),
                }
            )
    for i in range(MEETINGS):
        answers.append({"match": "Continuation to annotate", "context": f"topic{i} ", "text": fine(1 + i % 3)})
    return {"answers": answers}


def sim_script(word: str) -> dict:
    return {"answers": [{"match": "", "text": "\n".join(f"{SPEAKERS[t % 3]}: {word} {t}" for t in range(30))}]}


def cli(*args, ok=True, cwd=None):
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd
    )
    assert (out.returncode == 0) == ok, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    if not ok:
        assert out.returncode == 2, out.stdout + out.stderr
    return out


def params(tmp, name: str, bench: str, setups: dict[str, str], judge: str) -> str:
    p = tmp / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "out": f"runs/{name}",
                "bench": bench,
                "setups": [{"name": s, "model": f"mock/{tmp / script}"} for s, script in setups.items()],
                "judges": [{"name": "j", "model": f"mock/{tmp / judge}", "kind": ["fine_grained"]}],
                "llm": {"cache": "cache.sqlite"},
            },
            sort_keys=False,
        )
    )
    return str(p)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Runs ``a`` (setups sim, writing "point", and other, writing "idea") and ``b`` (sim, now
    writing "idea") on benchmarks built from the same meetings but meeting M7, whose text changed
    under the same ids; ``c``: run a's benchmark and setup under a judge of the same name but
    another model (another judge id); ``d``: other meetings (no instance shared with a)."""
    tmp = tmp_path_factory.mktemp("compare")
    for i in range(MEETINGS):
        write_json(tmp / "src_a" / "product" / f"M{i}.json", meeting(i, 200 + i))
        write_json(tmp / "src_b" / "product" / f"M{i}.json", meeting(i, 200 + i, "on" if i == 7 else "about"))
    for i in range(3):
        write_json(tmp / "src_d" / "product" / f"N{i}.json", meeting(i, 200 + i))
    for x in ("a", "b", "d"):
        build([f"qmsum:{tmp / f'src_{x}'}"], tmp / f"bench_{x}")
    for name, obj in (
        ("judge.yaml", judge_script()),
        ("judge2.yaml", judge_script()),  # the same answers, another model (file): another judge id
        ("point.yaml", sim_script("point")),
        ("idea.yaml", sim_script("idea")),
    ):
        (tmp / name).write_text(yaml.safe_dump(obj))
    for p in (
        params(tmp, "a", "bench_a", {"sim": "point.yaml", "other": "idea.yaml"}, "judge.yaml"),
        params(tmp, "b", "bench_b", {"sim": "idea.yaml"}, "judge.yaml"),
        params(tmp, "c", "bench_a", {"sim": "point.yaml"}, "judge2.yaml"),
        params(tmp, "d", "bench_d", {"sim": "point.yaml"}, "judge.yaml"),
    ):
        cli("run", p, "--no-progress")
    return tmp


def test_two_runs_are_compared_on_their_shared_instances_and_the_report_names_them(world):
    runs = world / "runs"
    out = cli("compare", runs / "a", runs / "b", "--out", world / "ab", "--resamples", "200")
    a, b = Run.open(runs / "a"), Run.open(runs / "b")
    changed = sorted(i.id for i in a.instances if "/M7/" in i.id)
    shared = [i.id for i in a.instances if i.id not in changed]
    assert changed and shared and len(shared) + len(changed) == len(a.instances) == len(b.instances)
    assert f"on {len(shared)} shared instances" in out.stdout
    assert (
        f"a: {len(changed)} of its {len(a.instances)} instances left out ({len(changed)} with other content"
        in out.stdout
    )
    for f in (
        "compare.md",
        "pairs.csv",
        "pairs.md",
        "ranks.csv",
        "runs.csv",
        "shared.csv",
        "left_out.csv",
        "index.html",
        "paired.png",
        "paired.svg",
        "paired.vl.json",
    ):
        assert (world / "ab" / f).is_file(), f
    md = (world / "ab" / "compare.md").read_text()
    assert md.index("## Which differences hold") < md.index("## What was compared")  # the answer first
    assert f"**Shared instances**: {len(shared)}" in md and "Beyond the paper" in md
    # v2 (b/sim, writing "idea") repeats itself more than v1 (a/sim): it holds, across runs
    assert "`b/sim` produces more *Repetition* than `a/sim`" in md.replace("\\", "")
    left = pl.read_csv(world / "ab" / "left_out.csv")
    assert sorted(left.filter(pl.col("run") == "a")["instance_id"].to_list()) == changed
    assert [
        w.startswith(f"other content in {'b' if r == 'a' else 'a'}") for r, w in left.select("run", "why").rows()
    ] == [True] * (2 * len(changed))
    runs_t = pl.read_csv(world / "ab" / "runs.csv")
    assert runs_t["shared"].to_list() == [len(shared)] * 2 and runs_t["other_content_elsewhere"].to_list() == [3, 3]
    assert len(set(runs_t["judge_id"].to_list())) == 1
    page = (world / "ab" / "index.html").read_text()
    assert "Which differences hold" in page and "http://" not in page.split("<script>")[0]
    assert "b/sim" in page and "a/other" in page  # the viewer's columns: each run's setups
    # both pages from one document: every line of compare.md's sections is on the page, and the
    # sections list only the figures and tables
    assert "<b>Shared instances</b>: " in page and "<b>Judge</b>: <code>j</code>" in page
    data = json.loads(page.split('id="cc-data">', 1)[1].split("</script>", 1)[0])
    assert [s["title"] for s in data["sections"]] == ["Which differences hold", "What was compared", "Tables"]
    assert [n for s in data["sections"] for n in s["names"]] == ["paired", *(t["name"] for t in data["tables"])]


def test_the_commands_numbers_are_compare_setups_on_the_two_runs_frames_put_together(world):
    """Independent of runcompare: the counts of each run's frames, its setups renamed RUN/setup,
    the reference from run a, on the instances whose content is the same, given to
    compare_setups directly."""
    runs = world / "runs"
    cli("compare", runs / "a", runs / "b", "--out", world / "ab2", "--resamples", "300", "--seed", "4")
    ra, rb = Run.open(runs / "a"), Run.open(runs / "b")
    same = {i.id for i in ra.instances} & {i.id for i in rb.instances}
    same = {x for x in same if ra.instance(x).content_hash() == rb.instance(x).content_hash()}
    parts = []
    for label, run, setups in (("a", ra, ["sim", "other"]), ("b", rb, ["sim"])):
        f = run_frames(run)
        c = f.counts.filter((pl.col("judge") == "j") & pl.col("instance_id").is_in(list(same)))
        keep = c.filter(pl.col("target").is_in(setups) | ((pl.col("target") == REFERENCE) & (label == "a")))
        keep = keep.with_columns(
            pl.when(pl.col("target") == REFERENCE).then(pl.col("target")).otherwise(label + "/" + pl.col("target"))
        )
        parts.append(keep.join(f.instances.select("instance_id", "conversation"), on="instance_id"))
    counts = pl.concat(parts).select("target", "instance_id", "conversation", "behaviour", "count")
    beh = run_frames(ra).taxonomy.ids
    got = pl.read_csv(world / "ab2" / "pairs.csv").drop("across_runs")
    order = list(dict.fromkeys([*got["a"], *got["b"]]))  # the setups in the order the command gave them
    assert sorted(order) == ["a/other", "a/sim", "b/sim"]
    direct = compare_setups(counts, beh, judge="j", setups=order, resamples=300, seed=4, correction="holm").frame()
    key = ["a", "b", "behaviour"]
    joined = got.join(direct, on=key, suffix="_direct")
    assert joined.height == direct.height == got.height > 0
    for col in ("n", "clusters", "diff", "ci_low", "ci_high", "p", "p_adj", "verdict"):
        x, y = joined[col].to_list(), joined[f"{col}_direct"].to_list()
        assert all((u is None and v is None) or u == v or abs(u - v) < 1e-9 for u, v in zip(x, y, strict=True)), col
    held = direct.filter((pl.col("behaviour") == DISTANCE) & (pl.col("a") == "a/sim") & (pl.col("b") == "b/sim"))
    assert held["diff"][0] < 0  # a/sim is closer to the humans than b/sim, as the script makes it


def test_a_run_compared_with_itself_has_no_difference_and_its_labels_are_made_unique(world):
    run = world / "runs" / "a"
    out = cli("compare", run, run, "--out", world / "aa", "--resamples", "100", "--setups", "sim")
    assert "a/sim" in out.stdout or "(a, a-2)" in out.stdout
    pairs = pl.read_csv(world / "aa" / "pairs.csv")
    assert pairs.select("a", "b").unique().rows() == [("a/sim", "a-2/sim")]
    assert "0 differences hold" in out.stdout and "**No difference holds**" in (world / "aa" / "compare.md").read_text()
    assert set(pairs["diff"].drop_nulls().to_list()) == {0.0}


def test_a_judge_whose_id_changed_between_runs_is_refused(world):
    runs = world / "runs"
    out = cli("compare", runs / "a", runs / "c", "--out", world / "ac", ok=False)
    assert "judge ids differ" in out.stderr and "how to fix" in out.stderr
    ids = [json.loads((runs / x / "manifest.json").read_text())["judges"]["j"]["fine_grained"] for x in "ac"]
    assert ids[0] != ids[1] and all(i in out.stderr for i in ids)  # each run's id named
    out = cli("compare", runs / "a", runs / "c", "--judge", "j", "--out", world / "ac", ok=False)
    assert "never by its name alone" in out.stderr
    out = cli("compare", runs / "a", runs / "b", "--judge", "nosuch", "--out", world / "ac", ok=False)
    assert "nosuch: no fine-grained judgment in a, b" in out.stderr and "under one id: j" in out.stderr
    assert not (world / "ac").exists()


def test_runs_that_share_no_instance_are_an_error_with_a_hint(world):
    runs = world / "runs"
    out = cli("compare", runs / "a", runs / "d", "--out", world / "ad", ok=False)
    assert "share no instance" in out.stderr and "how to fix" in out.stderr and "same benchmark" in out.stderr


def test_missing_runs_and_a_report_folder_inside_a_run_are_refused_naming_the_path(world):
    runs = world / "runs"
    out = cli("compare", runs / "a", world / "nowhere", ok=False)
    assert str(world / "nowhere") in out.stderr and "no run directory" in out.stderr
    out = cli("compare", runs / "a", world / "bench_a", ok=False)
    assert "manifest.json" in out.stderr
    out = cli("compare", runs / "a", runs / "b", "--out", runs / "a" / "cmp", ok=False)
    assert str(runs / "a" / "cmp") in out.stderr and "inside a run directory" in out.stderr
    assert not (runs / "a" / "cmp").exists()
    out = cli("compare", runs / "a", ok=False)
    assert "two run directories or more" in out.stderr
    out = cli("compare", runs / "a", runs / "b", "--setups", "nosuch", "--out", world / "x", ok=False)
    assert "nosuch" in out.stderr and "a/sim" in out.stderr


def test_the_default_folder_and_the_help_say_what_the_command_does(world):
    from cocoeval.analysis.inference import MIN_N

    runs = world / "runs"
    cli("compare", runs / "a", runs / "b", "--resamples", "50", cwd=world)
    assert (world / "compare-a-vs-b" / "compare.md").is_file()
    out = cli("compare", runs / "a", runs / "b", runs / "a", "--setups", "sim", "--resamples", "50", cwd=world).stdout
    assert (
        "compared 3 setups of 3 runs (a, b, a-2)" in out and (world / "compare-a-vs-b-vs-a-2" / "compare.md").is_file()
    )
    pairs = pl.read_csv(world / "compare-a-vs-b-vs-a-2" / "pairs.csv").select("a", "b").unique(maintain_order=True)
    assert pairs.rows() == [("a/sim", "b/sim"), ("a/sim", "a-2/sim"), ("b/sim", "a-2/sim")]
    text = cli("compare", "--help").stdout
    for opt in ("--judge", "--setups", "--out", "--resamples", "--seed", "--correction", "--min-n"):
        assert opt in text
    assert f"(default {MIN_N})" in " ".join(text.split()) and "holm (Holm, default)" in " ".join(text.split())
    assert "compare" in cli("--help").stdout


def test_the_notebook_shows_the_answer_the_command_writes(world, tmp_path):
    """Notebook 13 with run a's params file and compare_with = run b: the differences that hold,
    line for line as compare.md of the command with the same settings gives them."""
    import nbformat
    import papermill as pm

    from ..conftest import ROOT

    runs = world / "runs"
    cli("compare", runs / "a", runs / "b", "--out", tmp_path / "cmd", "--resamples", "200", "--correction", "bh")
    held = [x for x in (tmp_path / "cmd" / "compare.md").read_text().splitlines() if x.startswith("- `")]
    assert any("produces more" in x for x in held)
    nb = ROOT / "notebooks" / "13_compare_runs.ipynb"
    pm.execute_notebook(
        str(nb),
        str(tmp_path / "out.ipynb"),
        cwd=str(nb.parent),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "params_file": str(world / "a.yaml"),
            "run_dir": str(runs / "a"),
            "compare_with": str(runs / "b"),
            "figures_dir": str(tmp_path / "figures"),
            "resamples": 200,
            "correction": "bh",
        },
    )
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    shown = "\n".join(
        o.get("data", {}).get("text/markdown", "") for c in cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "Traceback" not in str(cells) and "Which setups differ, across runs" in shown
    for line in held:
        assert line in shown, line


def test_the_documented_v1_against_v2_walkthrough_runs_step_by_step(world, tmp_path):
    """docs/simulators.md, "Your simulator v1 against v2", then docs/analysis.md's two commands, in
    their order, in the researcher's folder: v2's judgments of the references v1 judged come from
    the call cache; the comparison's default folder holds the answer."""
    import shutil

    for b in ("bench_a", "bench_b"):
        shutil.copytree(world / b, tmp_path / b)
    for name, bench, script in (("v1", "bench_a", "point.yaml"), ("v2", "bench_b", "idea.yaml")):
        params(tmp_path, name, bench, {"mine": str(world / script)}, str(world / "judge.yaml"))
    cli("run", "v1.yaml", "--no-progress", cwd=tmp_path)
    cli("run", "v2.yaml", "--no-progress", cwd=tmp_path)
    n = len(Run.open(tmp_path / "runs" / "v2").instances)
    changed = sum("/M7/" in i.id for i in Run.open(tmp_path / "runs" / "v2").instances)
    usage = json.loads((tmp_path / "runs" / "v2" / "usage.json").read_text())
    assert usage["requests_sent"] == n + n + changed  # simulations, their judgments, and only the changed references
    out = cli("compare", "runs/v1", "runs/v2", "--setups", "mine", cwd=tmp_path).stdout
    md = (tmp_path / "compare-v1-vs-v2" / "compare.md").read_text()
    assert "compare-v1-vs-v2" in out and "`v2/mine` produces more *Repetition* than `v1/mine`" in md.replace("\\", "")
    cli("compare", "runs/v1", "runs/v2", "--out", "compare-v1-v2/", cwd=tmp_path)
    cli("compare", "runs/v1", "runs/v2", "--setups", "mine", "--correction", "bh", "--out", "bh", cwd=tmp_path)
    assert (tmp_path / "compare-v1-v2" / "index.html").is_file()
    assert "Benjamini" in (tmp_path / "bh" / "compare.md").read_text()


def test_the_notebooks_analysis_with_its_default_parameters_compares_the_run_with_itself(world):
    """Notebook 13's default compare_with (empty) on a run: the run against itself, a setup and its
    copy differing by 0 and none holding; a comparison the runs do not allow is its answer's text."""
    from cocoeval.analysis import analyses

    run = Run.open(world / "runs" / "a")
    p = analyses.Params(
        judge="j", resamples=100, correction="none", options={"compare_with": "", "compare_setups": "sim"}
    )
    ans = analyses.compute("compare_runs", run, p)
    assert ans is not None and "**No difference holds**" in ans.markdown() and "Holm is used" in ans.markdown()
    pairs = ans.tables["pairs"]
    assert set(pairs["diff"].drop_nulls().to_list()) == {0.0} and pairs["a"][0].startswith("a/")
    assert pairs["b"].str.starts_with("a-2/").all()
    other = analyses.Params(judge="j", resamples=100, options={"compare_with": str(world / "runs" / "d")})
    ans = analyses.compute("compare_runs", run, other)
    assert ans is not None and "**Not compared.**" in ans.markdown() and "share no instance" in ans.markdown()


@pytest.mark.timeout(300)
def test_the_comparisons_page_opens_from_file_with_no_network_and_shows_each_runs_setups(world, tmp_path):
    """index.html in a headless browser from file://: no error, nothing fetched, every table, and
    the viewer puts a shared instance's human reference beside a/sim and b/sim with the judge's tags."""
    from playwright.sync_api import sync_playwright

    from tests.notebooks.test_browser import CHROMIUM_ARGS, _chromium

    chromium = _chromium()
    runs = world / "runs"
    cli("compare", runs / "a", runs / "b", "--out", tmp_path / "cmp", "--resamples", "50")
    url = (tmp_path / "cmp" / "index.html").resolve().as_uri()
    iid = next(i.id for i in Run.open(runs / "a").instances if "/M0/" in i.id)
    errors: list[str] = []
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            def route(r):
                if r.request.url == url:
                    r.continue_()
                else:
                    outside.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(url)
            page.wait_for_selector("body[data-charts=done]", state="attached", timeout=60_000)
            assert page.locator(".cc-tabledetails").count() == 5
            assert page.locator('.cc-chart[data-figure="paired"][data-rendered] svg').count() == 1
            assert "Which differences hold" in page.locator("main").inner_text()
            for s in ("a/sim", "b/sim"):
                box = page.locator(f'#cc-setups input[value="{s}"]')
                if not box.is_checked():
                    box.check()
            page.select_option("#cc-instance", label=iid)
            page.wait_for_selector(f'#cc-view[data-instance="{iid}"]', state="attached", timeout=10_000)
            for target in ("reference", "a/sim", "b/sim"):  # a column per target: its head and its turns
                assert page.locator(f'.cc-head[data-target="{target}"]').count() == 1, target
                assert page.locator(f'.cc-turn[data-target="{target}"] .cc-tag').count() > 0, target
            assert "idea" in "".join(page.locator('.cc-turn[data-target="b/sim"]').all_inner_texts())
            assert "point" in "".join(page.locator('.cc-turn[data-target="a/sim"]').all_inner_texts())
            assert page.evaluate("window.ccErrors") == []
        finally:
            browser.close()
    assert not errors and not outside, (errors, outside)


def test_the_notebook_answers_result_is_the_comparison_its_text_is_rendered_from(world):
    """Notebook 13's answer (``analyses.compare_runs``) keeps the comparison in ``Answer.result``
    (``RunsCompared``): its text is rendered from it, one line per difference that holds, and a
    correction the paired comparisons do not offer is said and replaced by Holm."""
    from cocoeval.analysis import analyses
    from cocoeval.analysis.frames import open_run_dir
    from cocoeval.analysis.runcompare_prose import RunsCompared, render_runs_compared

    runs = world / "runs"
    p = analyses.Params(resamples=200, correction="none", options={"compare_with": str(runs / "b")})
    a = analyses.compute("compare_runs", open_run_dir(runs / "a"), p)
    x = a.result
    assert isinstance(x, RunsCompared) and x.comparison is not None
    text = render_runs_compared(x)
    assert a.text[: len(text)] == text and all(
        t.startswith("Beyond the paper: not validated") for t in a.text[len(text) :]
    )
    assert (x.asked_correction, x.correction_offered, x.comparison.comparison.correction) == ("none", False, "holm")
    assert text[1] == "Correction 'none' is not offered for paired comparisons: Holm is used."
    held = [t for t in "\n".join(text).splitlines() if t.startswith("- `")]
    assert held and len(held) == len(x.comparison.held())
