"""Figures rendered to PNG and SVG in worker processes while the report (or a notebook) computes.

vl-convert holds the GIL while it renders (measured: a Python loop beside a render in another
thread waits for the whole render), so a rendering *thread* serialises with the statistics instead
of overlapping them; and two threads in vl-convert can deadlock with the GIL. A worker *process*
has its own GIL: the report's ~15 s of rendering on the paper's shape runs beside its statistics.

A worker is a plain child interpreter (``python -m cocoeval.analysis.render``), never a fork
(polars' thread pool does not survive one) and never a ``multiprocessing`` pool: that starts a
resource tracker that ignores SIGTERM, and a Jupyter kernel that has one waits at shutdown,
signalling it, until the client kills the kernel (2.5 s a notebook). The caller writes each
figure's spec as ``<base>.vl.json`` and sends the worker one JSON line naming it; the worker
renders the figures in the order sent and, when its input ends, answers with one line listing
those that failed. A spec never goes through the pipe, so ``submit`` never waits for a worker.

Figure ``i`` goes to worker ``i mod n``: every worker renders a fixed sequence, so the ids
vl-convert numbers in its SVGs (gradients, clip paths: counted per process) are the same from one
report to the next. Every figure is rendered in such a process, ``charts.save``'s too.

Fonts: on Linux a rendering process starts with ``FONTCONFIG_FILE`` naming ``render_fonts.conf``,
so vl-convert draws the default sans-serif text with its own bundled Liberation Sans (2.00.1)
whatever the host has installed; the host's font folders are added after it
(``use_bundled_fonts``), for characters that font lacks and for fonts a chart names. Without
this, a host with Debian's ``fonts-liberation`` (1.07) had vl-convert draw every glyph from that
file, opened and mapped again for each glyph: on the paper's shape 330,000 openings, half of the
rendering's CPU (measured on two cores: 17 s of rendering became 8 s), and figures that depended
on the host: PNG text drawn with whichever Liberation Sans it had, and in SVGs (text and its
measured widths) the few characters the two versions measure differently, such as the em dash
(their Latin letters share Arial's metrics). Elsewhere (macOS, Windows) vl-convert's own choice of
host fonts stands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType

FONTS_CONF = Path(__file__).with_name("render_fonts.conf")


def process_env() -> dict[str, str]:
    """The environment a rendering process starts with: this very cocoeval importable (a checkout
    on ``sys.path``, not an installed one) and, on Linux, ``FONTCONFIG_FILE`` naming
    ``render_fonts.conf`` (read by vl-convert's fontdb, not by anything of the caller's)."""
    import cocoeval

    root = str(Path(cocoeval.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    if sys.platform.startswith("linux"):
        env["FONTCONFIG_FILE"] = str(FONTS_CONF)
    return env


def host_font_dirs() -> list[str]:
    """The host's font folders fontdb reads on Linux when fontconfig names none (those that exist)."""
    home = os.environ.get("HOME")
    dirs = ["/usr/share/fonts", "/usr/local/share/fonts"]
    dirs += [os.path.join(home, ".fonts"), os.path.join(home, ".local", "share", "fonts")] if home else []
    return [d for d in dirs if os.path.isdir(d)]


_fonts_ready = False


def use_bundled_fonts() -> None:
    """Called in a rendering process (started with ``process_env()``) before its first figure:
    vl-convert has begun with its bundled Liberation Sans alone (fontconfig named no folder), and
    the host's folders are added after it, so that the bundled faces come first for the default
    sans-serif text and the host's serve only what they lack. A process started otherwise (not on
    Linux, or without ``FONTS_CONF``) keeps vl-convert's own fonts."""
    global _fonts_ready
    import vl_convert as vlc

    if _fonts_ready or os.environ.get("FONTCONFIG_FILE") != str(FONTS_CONF):
        return
    for d in host_font_dirs():
        vlc.register_font_directory(d)
    _fonts_ready = True


def spec_path(base: str | Path) -> Path:
    """Where a figure's Vega-Lite spec is written: ``<base>.vl.json``."""
    base = Path(base)
    return base.parent / f"{base.name}.vl.json"


def _render_images(spec: str, base: Path, scale: float) -> None:
    """``<base>.png`` and ``.svg`` of a Vega-Lite ``spec`` (JSON text). One compilation to Vega and
    one render, to SVG; the PNG is rasterised from that SVG, which is what vl-convert's own PNG path
    does after rendering the chart a second time: the same PNG bytes (tested), a third of the time."""
    import vl_convert as vlc

    svg = vlc.vega_to_svg(vlc.vegalite_to_vega(spec))
    (base.parent / f"{base.name}.png").write_bytes(vlc.svg_to_png(svg, scale=scale))
    (base.parent / f"{base.name}.svg").write_text(svg, encoding="utf-8")


WARM_UP = (
    '{"data": {"values": [{"a": 1, "b": "x"}]}, "mark": "bar", "title": "t", "encoding": '
    '{"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b", "type": "nominal"}}}'
)
"""A chart a worker draws before its first figure arrives: vl-convert compiles its JavaScript and
loads its fonts (0.6 s) while the caller still reads the run, not in the first figure. It has no
clip and no gradient, whose ids vl-convert counts per process: the figures are the same (tested)."""


NICE = 10
"""How much a rendering process lowers its priority (``os.nice``): the caller computing the report
runs whenever it can, and the workers take the rest of the cores. Three busy processes on two
cores otherwise share them equally, the caller getting two thirds of one: its statistics, and so
the figures it submits, come later (measured on the paper's shape, two cores: the report 1 s
faster, 12.1 s -> 10.9 s on average)."""


def _serve() -> None:
    """A worker: one JSON line ``{"base", "scale"}`` per figure on stdin, its spec already in
    ``<base>.vl.json``; at the end of the input, one JSON line ``{"failed": [[base, error], ...]}``."""
    if hasattr(os, "nice"):  # POSIX
        os.nice(NICE)
    import vl_convert as vlc

    use_bundled_fonts()
    vlc.svg_to_png(vlc.vega_to_svg(vlc.vegalite_to_vega(WARM_UP)), scale=2.0)
    failed = []
    for line in sys.stdin:
        job = json.loads(line)
        base = Path(job["base"])
        try:
            _render_images(spec_path(base).read_text(encoding="utf-8"), base, float(job["scale"]))
        except Exception as e:  # reported to the caller, who raises it
            failed.append([str(base), f"{type(e).__name__}: {e}"])
    try:
        sys.stdout.write(json.dumps({"failed": failed}) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the caller ended without waiting (a kernel shut down): nobody to tell
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor a traceback at exit


class RenderError(RuntimeError):
    """A figure that failed to render (its file and vl-convert's error)."""


class Renderer:
    """Renders figures as they are submitted; ``close()`` waits for every one and raises the
    first failure (a figure that fails to render fails the report). A context manager: leaving it
    on an exception stops the workers (what they had not rendered is not)."""

    def __init__(self, workers: int) -> None:
        """``workers`` processes: the caller says how many (``report.render_workers`` for a report;
        one where the figures should be written in order, as a notebook shows them)."""
        if workers < 1:
            raise ValueError(f"a Renderer needs at least one worker process, not {workers}")
        env = process_env()
        # started now, so that they load vl-convert while the caller reads the run
        self._procs = [
            subprocess.Popen(
                [sys.executable, "-m", "cocoeval.analysis.render"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
                encoding="utf-8",
            )
            for _ in range(workers)
        ]
        self._submitted = 0

    def submit(self, spec: str, base: Path, scale: float = 2.0) -> None:
        """Write the figure's spec as ``<base>.vl.json`` and queue its PNG and SVG."""
        if not self._procs:
            raise RuntimeError("this Renderer is closed: start another")
        base = Path(base)
        base.parent.mkdir(parents=True, exist_ok=True)
        spec_path(base).write_text(spec, encoding="utf-8")  # the worker reads it there
        proc = self._procs[self._submitted % len(self._procs)]
        self._submitted += 1
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps({"base": str(base.resolve()), "scale": scale}) + "\n")
            proc.stdin.flush()
        except OSError:  # the worker has ended: close() says so
            pass

    def close(self) -> None:
        failed: list[list[str]] = []
        for proc in self._procs:
            try:
                out, _ = proc.communicate()  # ends its input: it renders what it has, then answers
            except OSError:  # its input was already broken
                out, _ = "", proc.wait()
            try:
                answer = json.loads(out)["failed"] if proc.returncode == 0 else None
            except (ValueError, KeyError, TypeError):
                answer = None
            if answer is None:
                failed.append(["(a rendering worker)", f"it ended with exit status {proc.returncode} before answering"])
            else:
                failed += answer
        self._procs = []
        if failed:
            base, error = failed[0]
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise RenderError(f"figure {base} failed to render: {error}{more}")

    def __enter__(self) -> Renderer:
        return self

    def discard(self) -> None:
        """Stop the workers at once (what they had not rendered is not)."""
        for proc in self._procs:
            proc.kill()
            proc.communicate()
        self._procs = []

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
        else:
            self.discard()


if __name__ == "__main__":
    _serve()
