"""The notebooks as a researcher sees them: JupyterLab on 127.0.0.1 driven by Chromium (Debian's
``chromium`` through Playwright; Playwright's own browser download is never used), on a tiny run
made here against the loopback fake provider. Every request that leaves 127.0.0.1 is refused and
counted as a failure, so the charts must render with no network.

Skipped with the reason when chromium or Playwright is missing, except where
``COCOEVAL_REQUIRE_BROWSER=1`` or ``CI=true`` (as ``.ci/run`` sets): there their absence fails.
Screenshots go to ``$COCOEVAL_ARTIFACTS/browser`` (default ``out/browser`` in the checkout)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from cocoeval import build
from cocoeval.analysis.charts import HUMAN
from cocoeval.bench.config import BuildConfig
from tests.fakes.server import FakeServer

from ..conftest import ROOT, qmsum_meeting, write_json

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOKS = ["02_rq2_vanilla", "09_explore"]
SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
SIM_ANSWER = "\n".join(f"{s}: simulated point {i}" for i, s in enumerate(SPEAKERS * 2))
# every target, reference and simulated: turn 1 unclear intent, turn 3 a repetition
FINE = json.dumps(
    {
        "turns": [
            {
                "turn": i,
                "behaviours": (
                    [{"behaviour": "Unclear intent", "evidence": "no clear point"}]
                    if i == 1
                    else [{"behaviour": "Repetition", "evidence": "said before"}]
                    if i == 3
                    else []
                ),
            }
            for i in range(1, 7)
        ]
    }
)
OVERALL = '{"consistency": 7, "collaborativeness": 6, "rationale": "fine"}'


def _required() -> bool:
    return os.environ.get("COCOEVAL_REQUIRE_BROWSER") == "1" or os.environ.get("CI", "").lower() == "true"


def _chromium() -> str:
    path = os.environ.get("COCOEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    why = None
    if not path:
        why = "chromium is not installed (apt-get install chromium; .ci/run does it)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "Playwright for Python is not installed (pip install -e '.[dev]')"
    if why:
        if _required():
            pytest.fail(f"the browser test must run here (COCOEVAL_REQUIRE_BROWSER=1 or CI=true) but {why}")
        pytest.skip(why)
    return str(path)


@pytest.fixture(scope="module")
def artefacts() -> Path:
    out = Path(os.environ.get("COCOEVAL_ARTIFACTS") or ROOT / "out") / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[Path, Path]:
    """Eight meetings in two QMSum domains; setup 'k6' simulated everywhere, 'k6p' (vanilla) only
    on the product meetings; one judge. Returns (params file, run directory)."""
    tmp = tmp_path_factory.mktemp("browser-run")
    for domain in ("product", "academic"):
        for i in range(4):
            write_json(tmp / "src" / domain / f"{domain[0].upper()}{i}.json", qmsum_meeting(60 + i, SPEAKERS))
    build(
        [f"qmsum:{tmp / 'src'}"],
        tmp / "bench",
        BuildConfig(history_turns=8, reference_turns=6, min_prior_turns=5, per_dataset=2, seed=0),
    )
    with FakeServer() as srv:
        srv.configure(
            answers=[
                {"match": "Continuation to annotate", "text": FINE},
                {"match": "Continuation to evaluate", "text": OVERALL},
                {"match": "", "text": SIM_ANSWER},
            ]
        )
        url = srv.openai_base
        params = tmp / "tiny.yaml"
        params.write_text(
            yaml.safe_dump(
                {
                    "name": "tiny",
                    "out": "runs/tiny",
                    "bench": "bench",
                    "setups": [
                        {
                            "name": "k6",
                            "model": f"openai-compatible/fake@{url}",
                            "turns_per_call": 6,
                            "prompt": "taxonomy",
                        },
                        {
                            "name": "k6p",
                            "model": f"openai-compatible/fake@{url}",
                            "turns_per_call": 6,
                            "datasets": ["qmsum_product"],
                        },
                    ],
                    "judges": [{"name": "judge1", "model": f"openai-compatible/judge@{url}"}],
                    "llm": {"cache": "cache.sqlite"},
                }
            )
        )
        out = subprocess.run(
            [sys.executable, "-m", "cocoeval", "run", str(params), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp,
        )
        assert out.returncode == 0, out.stderr[-3000:]
    return params, tmp / "runs" / "tiny"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tiny_run, tmp_path_factory):
    """One JupyterLab server on 127.0.0.1 over copies of the notebooks, parameterized for the
    tiny run (papermill's parameter injection, as a user's ``-p`` would)."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    params, run_dir = tiny_run
    tmp = tmp_path_factory.mktemp("lab")
    nb_dir = tmp / "notebooks"
    nb_dir.mkdir()
    for name in NOTEBOOKS:
        nb = load_notebook_node(str(ROOT / "notebooks" / f"{name}.ipynb"))
        nb = parameterize_notebook(nb, {"params_file": str(params), "resamples": 50, "min_n": 2})
        nbformat.write(nb, nb_dir / f"{name}.ipynb")
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no news or update checks (they would leave the machine)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port, token = _free_port(), "cocoeval-browser-test"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"),
        "IPYTHONDIR": str(tmp / "ipython"),
    }
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={nb_dir}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.extension_manager=readonly",
            "--allow-root",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp / "lab.log").read_text()[-3000:])
                time.sleep(1)
        yield {"base": base, "token": token, "run_dir": run_dir, "params": params, "log": tmp / "lab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


class Page:
    """A Chromium page on the lab that records console errors and every failed or outside request."""

    def __init__(self, browser, lab, artefacts: Path) -> None:
        self.lab, self.artefacts = lab, artefacts
        self.problems: list[str] = []
        self.page = browser.new_page(viewport={"width": 1500, "height": 1000})
        self.page.set_default_timeout(60_000)
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console error: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed request: {r.url} ({r.failure})"))

    def _route(self, route) -> None:
        host = urlparse(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            route.continue_()
        else:
            self.problems.append(f"request off the machine: {route.request.url}")
            route.abort()

    def open_and_run(self, name: str) -> None:
        """Open a notebook in Lab (``window.cc`` holds its panel), run all cells, wait for the
        kernel to finish, and fail on any cell error."""
        p = self.page
        if "/lab" not in p.url:
            p.goto(f"{self.lab['base']}/lab?token={self.lab['token']}")
            p.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
            p.evaluate("() => window.jupyterapp.started")
        p.evaluate(
            """async (path) => {
            const app = window.jupyterapp;
            await app.restored;
            if (window.cc) {  // one notebook at a time: the last one's kernel and tab go
                await window.cc.sessionContext.shutdown();
                window.cc.dispose();
            }
            const w = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
            window.cc = w;
            await w.context.ready; await w.sessionContext.ready;
            app.shell.activateById(w.id);
            await app.commands.execute('notebook:run-all-cells');
        }""",
            f"{name}.ipynb",
        )
        try:
            p.wait_for_function(
                """() => {
                const w = window.cc;
                const k = w.sessionContext.session && w.sessionContext.session.kernel;
                const cells = w.content.widgets.filter(c => c.model.type === 'code');
                return k && k.status === 'idle' && cells.every(c => c.model.executionCount !== null);
            }""",
                timeout=300_000,
                polling=500,
            )
        except Exception:
            self.shot(f"{name}_timeout")
            raise
        errors = p.evaluate("""() => window.cc.content.widgets
            .filter(c => c.model.type === 'code')
            .flatMap(c => c.model.sharedModel.outputs.filter(o => o.output_type === 'error')
            .map(o => o.ename + ': ' + o.evalue + '\\n' + (o.traceback || []).join('\\n')))""")
        assert not errors, f"{name}: a cell failed:\n" + "\n".join(errors)

    def charts(self, kind: str | None = None):
        """Every chart output: the Vega-Lite 5 specs (``RunContext.show``) Lab draws with its own
        renderer (``kind="spec"``), and every widget output that is not an ipywidgets control
        (``kind="widget"``): the linked chart, and any widget that failed to show. Neither output
        has a mime-type attribute (Lab's vega renderer sets none); the vega one has its class."""
        spec = ".jp-OutputArea-output.jp-RenderedVegaLite:not([data-mime-type])"
        widget = ".jp-OutputArea-output:not([data-mime-type]):not(.jp-RenderedVegaLite)"
        css = {None: f"{spec}, {widget}", "spec": spec, "widget": widget}[kind]
        outs = self.page.locator(css)
        return [outs.nth(i) for i in range(outs.count()) if outs.nth(i).locator(":scope > .widget-box").count() == 0]

    def assert_charts_rendered(self, name: str, at_least: int) -> int:
        p = self.page
        try:
            p.wait_for_function(
                f"() => document.querySelectorAll('.vega-embed svg.marks, .vega-embed canvas').length >= {at_least}",
                timeout=60_000,
                polling=500,
            )
        except Exception:
            self.shot(f"{name}_no_charts")
            pytest.fail(f"{name}: fewer than {at_least} charts rendered; " + "\n".join(self.problems))
        charts = self.charts()
        assert len(charts) >= at_least, f"{name}: {len(charts)} chart outputs, expected {at_least}"
        for i, c in enumerate(charts):
            assert c.locator(".vega-embed svg.marks, .vega-embed canvas").count() == 1, (
                f"{name}: chart output {i} holds no rendered chart: {c.inner_text()[:300]!r}"
            )
        text = p.locator(".jp-Notebook:visible").inner_text()
        for bad in ("Error displaying widget", "Failed to create view", "JavaScript Error", "Error loading script"):
            assert bad not in text, f"{name}: {bad!r} shown"
        return len(charts)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.artefacts / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def browser():
    path = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.mark.timeout(900)
def test_notebooks_in_a_real_browser(browser, lab, artefacts):
    from cocoeval.notebooks.widgets import ConversationViewer
    from cocoeval.run import Run

    page = Page(browser, lab, artefacts)
    p = page.page

    # RQ2: the static charts and the linked chart render with no network
    page.open_and_run("02_rq2_vanilla")
    page.assert_charts_rendered("02_rq2_vanilla", at_least=2)
    # the answer's charts are specs Lab draws (no widget); the linked chart is the one widget
    assert len(page.charts("spec")) >= 1 and len(page.charts("widget")) == 1
    page.shot("02_rq2_vanilla")

    # Explore: click the human bar of the product-only panel; the viewer lists its turns
    page.open_and_run("09_explore")
    page.assert_charts_rendered("09_explore", at_least=1)
    expected = ConversationViewer(Run.open(lab["run_dir"]), judge="judge1").bar("k6p", HUMAN, "unclear_intent")
    assert expected.n == 2 and len(expected.rows) == 2  # one per product instance, none of the others
    bar = p.locator(
        '.vega-embed path[aria-roledescription="bar"][aria-label*="panel: k6p"]'
        f'[aria-label*="series: {HUMAN}"][aria-label*="name: Unclear intent"]'
    )
    # the paper's Figure 3 of the answer shows this bar too; the linked chart is the one above the
    # viewer, the last chart of the notebook
    assert bar.count() >= 1
    bar.last.click()
    behind = p.locator(".cc-behind")
    behind.wait_for()
    text = behind.inner_text()
    assert f"{len(expected.rows)} turn(s) in {len(expected.instances)} of {expected.n} instance(s)" in text
    for iid, turn, _, _ in expected.rows:
        assert f"{iid} #{turn + 1}" in text
    p.locator("h4", has_text=expected.instances[0]).wait_for()  # the viewer shows a contributing instance
    assert p.locator(".cc-title").all_inner_texts() == [HUMAN, "k6p"]  # and the bar's setup beside it
    page.shot("09_explore_bar_clicked")

    # a filter change updates the viewer
    ds = p.locator(".widget-dropdown", has_text="dataset").locator("select").first
    ds.select_option(label="qmsum_academic")
    p.wait_for_function("() => [...document.querySelectorAll('h4')].some(h => h.innerText.includes('qmsum_academic'))")

    # an annotation saved in the browser imports with cocoeval annotate-import (saved twice)
    p.locator(".widget-text", has_text="annotator").locator("input").fill("browser1")
    p.locator(".widget-text", has_text="annotator").locator("input").press("Enter")
    p.locator(".widget-select-multiple", has_text="turn 1").locator("select").first.select_option(label="Repetition")
    save = p.locator("button", has_text="Save")
    save.click()  # the other turns are not marked and the scores not rated: nothing is saved, and said
    p.wait_for_function(
        "() => [...document.querySelectorAll('.widget-html')].some(s => "
        "s.innerText.includes('Nothing saved') && s.innerText.includes('consistency not rated'))"
    )
    for box in p.locator(".widget-checkbox", has_text=": none (no behaviour)").all():
        if "turn 1: none" not in box.inner_text():  # every other judged turn: none
            box.locator("input").check()
    for score in ("consistency (1-10)", "collaborativeness (1-10)"):
        p.locator(".widget-dropdown", has_text=score).locator("select").select_option(label="7")
    save.click()
    p.locator(".cc-saved").wait_for()
    save.click()
    p.wait_for_function(
        "() => [...document.querySelectorAll('.cc-saved')].some(s => s.innerText.includes('replacing'))"
    )
    page.shot("09_explore_annotated")
    csv = lab["run_dir"] / "annotations.csv"
    out = subprocess.run(
        [sys.executable, "-m", "cocoeval", "annotate-import", str(csv), str(lab["run_dir"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    human = Run.open(lab["run_dir"]).all_judgments["human:browser1"]
    fine = next(j for j in human if j.kind == "fine_grained")
    assert fine.status == "ok" and fine.labels[0].behaviours == ["repetition"]
    assert all(lb.behaviours == [] for lb in fine.labels[1:])
    assert [(j.consistency, j.collaborativeness) for j in human if j.kind == "overall"] == [(7, 7)]

    assert not page.problems, "\n".join(page.problems)
