"""Glue for the notebooks: open a run from a params file, show answers, save figures, viewers.
Everything a notebook does beyond calling these lives in the package."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from cocoeval.analysis import charts, inference, render, stats
from cocoeval.analysis.answer import Answer
from cocoeval.analysis.coverage import coverage_markdown, paper_coverage
from cocoeval.analysis.frames import Frames, invalid_rates, open_run_dir, run_frames
from cocoeval.analysis.judge_free import pipeline_check
from cocoeval.analysis.report import default_judge, markdown_table
from cocoeval.analysis.store import RunLike
from cocoeval.core.files import portable_path
from cocoeval.core.text import md_escape
from cocoeval.run import Experiment, load_params

EMBED_OPTIONS = {"renderer": "svg"}
"""vega-embed options of every chart in the notebooks: SVG (crisp, and each mark is an element)."""


def setup(*, offline: bool = True) -> None:
    """Make Altair charts render in Jupyter with no network: a chart is shown as a Vega-Lite 5
    spec (``charts.mimebundle``, mime type ``application/vnd.vegalite.v5+json``) that JupyterLab
    and Notebook 7 draw with their built-in vega-embed (VS Code with its Jupyter renderers), so an
    executed notebook carries each figure once and no JavaScript; this registers and enables the
    Altair renderer ``"cocoeval"`` that does it, so a chart shown by ``display(chart)`` or as a
    cell's last value renders the same way as ``RunContext.show``'s. Only ``linked_chart`` is an ``alt.JupyterChart``
    widget (its clicks reach Python); it bundles its JavaScript from vl-convert itself. ``open_run``
    calls this; calling it again costs nothing. ``offline=False`` goes back to Altair's default
    renderer. Saving figures (``charts.save``) never needs a browser either way."""
    import altair as alt

    if offline:
        if "cocoeval" not in alt.renderers.names():
            alt.renderers.register("cocoeval", _render)
        alt.renderers.enable("cocoeval", embed_options=EMBED_OPTIONS)
    else:
        alt.JupyterChart.enable_offline(offline=False)
        alt.renderers.enable("default")


def bundle_cache_dir() -> Path:
    """Where ``enable_offline`` keeps the linked chart's JavaScript bundle between kernels:
    ``$COCOEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/cocoeval``, else ``~/.cache/cocoeval`` (read
    when called, never at import)."""
    import os

    if os.environ.get("COCOEVAL_CACHE_DIR"):
        return Path(os.environ["COCOEVAL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cocoeval"


def enable_offline() -> Path | None:
    """``alt.JupyterChart.enable_offline()``, its bundle kept on disk: Altair has vl-convert bundle
    vega, vega-lite and vega-embed with its widget's JavaScript (1.4 s on an idle core, 3 s on a
    busy one, in every kernel that shows the linked chart); the bundle Altair made is kept under
    ``bundle_cache_dir()``, in a file named by what it is made from (the Altair and vl-convert
    versions, the Vega-Lite version and the widget's source) and by its own SHA-256, and a later
    kernel reads it back when its bytes still have that hash (anything else is made again). A
    folder that cannot be written only means the bundle is made each time. Returns the file kept,
    None when nothing is."""
    import hashlib
    import os

    import altair as alt
    import vl_convert as vlc
    from altair.jupyter import jupyter_chart
    from altair.utils._importers import vl_version_for_vl_convert

    from cocoeval.core.jsonio import temp_beside

    if alt.JupyterChart._is_offline:
        return None
    made_of = json.dumps(
        [alt.__version__, getattr(vlc, "__version__", None), vl_version_for_vl_convert(), jupyter_chart.load_js_src()]
    )
    name = f"vega-bundle-{hashlib.sha256(made_of.encode()).hexdigest()[:32]}"
    try:
        folder = bundle_cache_dir()
        for kept in sorted(folder.glob(f"{name}-*.js")):
            data = kept.read_bytes()
            if kept.stem.endswith("-" + hashlib.sha256(data).hexdigest()[:32]):
                alt.JupyterChart._esm = data.decode("utf-8")  # what enable_offline sets
                alt.JupyterChart._is_offline = True
                return kept
    except (OSError, RuntimeError, UnicodeDecodeError):  # RuntimeError: no home folder
        folder = None
    alt.JupyterChart.enable_offline()
    if folder is None:
        return None
    data = alt.JupyterChart._esm.encode("utf-8")
    path = folder / f"{name}-{hashlib.sha256(data).hexdigest()[:32]}.js"
    try:  # whole or not at all (a temporary file, then renamed); never redacted: code, not text
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(path)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return None
    return path


def _render(spec: dict[str, Any], **metadata: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``"cocoeval"`` Altair renderer: the Vega-Lite 5 display bundle of a chart's spec."""
    return charts.mimebundle(spec, metadata.get("embed_options", EMBED_OPTIONS))


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


@dataclass
class RunContext:
    experiment: Experiment
    run_dir: Path
    run: RunLike
    frames: Frames
    judge: str | None
    _renderer: render.Renderer | None = field(default=None, init=False, repr=False, compare=False)
    _pending: list[Path] = field(default_factory=list, init=False, repr=False, compare=False)

    def summary_markdown(self) -> str:
        m = self.run.manifest
        rates = invalid_rates(self.frames)
        e = md_escape
        lines = [
            f"Run **{e(m.params.name or self.run_dir.name)}** ({e(portable_path(self.run_dir, Path.cwd()))}), status "
            f"{e(m.status)}, cocoeval {e(m.cocoeval_version)}, taxonomy "
            f"{e(m.taxonomy.get('hash'))}.",
            f"{self.frames.instances.height} instances; setups: "  # the frames: one row per instance
            f"{', '.join(e(x) for x in self.run.names('continuations')) or 'none'}; judges: "
            f"{', '.join(e(x) for x in self.run.names('all_judgments')) or 'none'}; figures use judge "
            f"**{e(self.judge)}**.",
            "",
            "Invalid continuations and judgments (shown beside every statistic):",
            "",
            markdown_table(rates),
            "",
            coverage_markdown(paper_coverage(self.run), heading="###"),
        ]  # the paper's elements this run lacks
        if pipeline_check(m):
            lines[:0] = [
                f"**{charts.PIPELINE_CHECK[0].upper()}{charts.PIPELINE_CHECK[1:]}.** This run is labelled "
                "`label: pipeline-check`: its judge-based figures and answers show that the judge path runs "
                "end to end, not findings. Judge-free statistics (notebook 10) are real measurements of the "
                "human references and of the tiny model's continuations.",
                "",
            ]
        return "\n".join(lines)

    def figures_path(self, figures_dir: str | Path | None, notebook: str) -> Path:
        """Where a notebook's figures go: ``figures_dir/notebook``; an empty ``figures_dir`` means
        the run's own folder (``<run>/figures``), so running a notebook changes no tracked file."""
        return (Path(figures_dir) if figures_dir else self.run_dir / "figures") / notebook

    def analysis(
        self,
        name: str,
        resamples: int = 1000,
        seed: int = 0,
        *,
        min_n: int = inference.MIN_N,
        correction: str = "bh",
        **options: Any,
    ) -> Answer | None:
        """The answer of the registered analysis ``name`` (``cocoeval.analysis.analyses``) on this run, with
        this context's frames and judge; ``options``: the analysis's own (a notebook's extra
        parameters). None: nothing to show (e.g. no judge). The process that renders the figures
        ``show`` saves starts here, so that it loads vl-convert while the analysis is computed."""
        from cocoeval.analysis import analyses

        self._rendering()
        return analyses.compute(
            name,
            self.run,
            analyses.Params(
                judge=self.judge,
                resamples=resamples,
                seed=seed,
                min_n=min_n,
                correction=correction,
                frames=self.frames,
                bench_dir=self.experiment.bench_dir() if self.experiment is not None else None,
                options=options,
            ),
        )

    def show(self, answer: Answer | None, notebook: str, figures_dir: str | Path | None = None) -> list[Path]:
        """Display the computed answer, its tables and charts (each a Vega-Lite 5 spec the
        frontend draws, ``charts.mimebundle``: no widget); save the charts as PNG and SVG under
        ``figures_path(figures_dir, notebook)``, the files ``charts.save`` writes. They are rendered
        in a background process (``render.Renderer``) while the notebook goes on: the paths returned
        are written once ``wait_for_figures()`` returns (a notebook's last cell calls it). No answer
        (None) shows nothing."""
        from IPython.display import Markdown, display

        if answer is None:
            return []
        display(Markdown(answer.markdown()))
        for name, df in answer.tables.items():
            display(Markdown(f"*{md_escape(name)}*"))
            display(df)
        saved: list[Path] = []
        marked = answer.judge_based and pipeline_check(self.run.manifest)
        for name, ch in answer.charts.items():
            if marked:
                ch = charts.titled(ch, f"{name.replace('_', ' ')} — {charts.PIPELINE_CHECK}")
            spec = ch.to_dict()  # once, for the display and the files
            data, md = charts.mimebundle(spec, EMBED_OPTIONS)
            display(data, raw=True, metadata=md)  # the spec once, drawn by the frontend (see setup)
            saved += self._save(spec, self.figures_path(figures_dir, notebook) / name)
        return saved

    def _rendering(self) -> render.Renderer:
        """The rendering process, started on first use (by ``analysis`` or ``_save``: a notebook
        that computes and saves nothing spawns none). One: the figures in order, as
        ``charts.save`` would write them."""
        if self._renderer is None:
            self._renderer = render.Renderer(1)
        return self._renderer

    def _save(self, spec: dict[str, Any], base: Path) -> list[Path]:
        self._rendering().submit(charts.spec_json(spec), base)
        paths = charts.figure_paths(base)
        self._pending += paths
        return paths

    def wait_for_figures(self) -> list[Path]:
        """Wait until every figure ``show`` has saved so far is written; returns their paths.
        Raises the first figure that failed to render (a notebook run headless then fails, its
        figures not silently missing). A later ``show`` starts rendering again."""
        renderer, self._renderer = self._renderer, None
        done, self._pending = self._pending, []
        if renderer is not None:
            renderer.close()
        return done

    def viewer(self) -> Any:
        from .widgets import ConversationViewer

        return ConversationViewer(self.run, judge=self.judge, taxonomy=self.frames.taxonomy)

    def linked_chart(self, viewer: Any, answer: Answer | None = None, *, setups: list[str] | None = None) -> Any:
        """Figure 3 as an ``alt.JupyterChart`` widget: clicking a bar lists its turns in ``viewer``
        (the one chart of a notebook that is a widget; its JavaScript, vega and vega-embed, is
        bundled from vl-convert, once per kernel, so it needs no network). Its setups: ``setups``,
        else those ``answer`` compares (``Answer.setups``), else every one."""
        import altair as alt

        if setups is None and answer is not None:
            setups = answer.setups
        if self.judge is None:
            return None
        fig3 = answer.tables.get("figure3") if answer is not None and setups == answer.setups else None
        means = fig3 if fig3 is not None else stats.figure3_means(self.frames, self.judge, setups)  # the table's CIs
        if means.is_empty():
            return None
        setup()
        enable_offline()  # the bundle made once, then read back from disk by every kernel
        jc = alt.JupyterChart(
            charts.behaviour_bars(means, self.frames.taxonomy, judge=self.judge, setups=setups, selectable=True),
            embed_options=EMBED_OPTIONS,
        )
        viewer.link(jc)
        return jc

    def annotator(self, out_csv: str | Path | None = None) -> Any:
        """An annotator over every target of the run (pick one in its menu): the reference of every
        instance, then every setup's current ok continuation (a stale one, simulated with other
        settings, counts nowhere and is not offered), listed from the frames and each read when it
        is chosen (``RunStore.instance``, ``RunStore.continuation``: one line each, not the run's 5,000
        records). Save writes ``<run>/annotations.csv`` unless ``out_csv`` says otherwise. None
        when there is nothing."""
        import polars as pl

        from cocoeval.core.targets import REFERENCE, TargetRef

        from .widgets import Annotator

        targets = [
            TargetRef(iid, REFERENCE, partial(self._target, iid, REFERENCE))
            for iid in self.frames.instances["instance_id"].to_list()
        ]
        ok = self.frames.continuations.filter(pl.col("status") == "ok")
        targets += [
            TargetRef(iid, name, partial(self._target, iid, name))
            for name, iid in ok.select("setup", "instance_id").iter_rows()
        ]
        if not targets:
            return None
        return Annotator(targets, out_csv or self.run_dir / "annotations.csv", taxonomy=self.frames.taxonomy)

    def _target(self, instance_id: str, name: str) -> Any:
        """The target ``name`` (``REFERENCE`` or a setup) of instance ``instance_id``, read."""
        from cocoeval.core.targets import REFERENCE, continuation_target, reference_target

        inst = self.run.instance(instance_id)
        c = None if name == REFERENCE else self.run.continuation(name, instance_id)
        if inst is None or (name != REFERENCE and c is None):
            from cocoeval.core.errors import InputError

            raise InputError(
                f"{name} of instance {instance_id} is no longer in {self.run_dir}",
                hint="the run changed since it was opened: open_run it again",
            )
        return reference_target(inst) if c is None else continuation_target(inst, name, c)


def open_run(
    params_file: str | Path,
    *,
    run_dir: str | Path | None = None,
    judge: str | None = None,
    run_if_missing: bool = False,
) -> RunContext:
    """The run a params file describes (or ``run_dir``); runs it first when asked and missing.
    In a Jupyter kernel it also sets charts up to render offline (``setup``)."""
    if _in_kernel():
        setup()
    exp = load_params(params_file)
    rd = Path(run_dir) if run_dir else exp.run_dir
    if not (rd / "manifest.json").exists():
        if not run_if_missing:
            from cocoeval.core.errors import NotFoundError

            raise NotFoundError(
                f"no run at {rd}",
                hint=f"run it first: cocoeval run {params_file} (or set run_if_missing = True in the parameters cell)",
            )
        rd = exp.run()
    run = open_run_dir(rd, exp.taxonomy)  # read once per kernel while the run's files are unchanged; its frames too
    frames = run_frames(run, exp.taxonomy)
    return RunContext(exp, rd, run, frames, judge or default_judge(frames))
