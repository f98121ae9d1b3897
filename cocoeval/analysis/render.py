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
report to the next. ``workers=0`` renders in the calling process, in order (the path tests
compare with)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType


def render_figure(spec: str, base: str | Path, scale: float = 2.0) -> None:
    """``<base>.png`` and ``.svg`` of a Vega-Lite ``spec`` (JSON text) and the spec itself as
    ``<base>.vl.json`` (what the HTML report embeds). One compilation to Vega and one render, to
    SVG; the PNG is rasterised from that SVG, which is what vl-convert's own PNG path does after
    rendering the chart a second time: the same PNG bytes (tested), a third of the time."""
    base = Path(base)
    base.parent.mkdir(parents=True, exist_ok=True)
    _render_images(spec, base, scale)
    spec_path(base).write_text(spec, encoding="utf-8")


def spec_path(base: str | Path) -> Path:
    """Where a figure's Vega-Lite spec is written: ``<base>.vl.json``."""
    base = Path(base)
    return base.parent / f"{base.name}.vl.json"


def _render_images(spec: str, base: Path, scale: float) -> None:
    import vl_convert as vlc

    svg = vlc.vega_to_svg(vlc.vegalite_to_vega(spec))
    (base.parent / f"{base.name}.png").write_bytes(vlc.svg_to_png(svg, scale=scale))
    (base.parent / f"{base.name}.svg").write_text(svg, encoding="utf-8")


def _serve() -> None:
    """A worker: one JSON line ``{"base", "scale"}`` per figure on stdin, its spec already in
    ``<base>.vl.json``; at the end of the input, one JSON line ``{"failed": [[base, error], ...]}``."""
    import vl_convert  # noqa: F401  # loaded before the first figure arrives

    failed = []
    for line in sys.stdin:
        job = json.loads(line)
        base = Path(job["base"])
        try:
            _render_images(spec_path(base).read_text(encoding="utf-8"), base, float(job["scale"]))
        except Exception as e:  # reported to the caller, who raises it
            failed.append([str(base), f"{type(e).__name__}: {e}"])
    sys.stdout.write(json.dumps({"failed": failed}) + "\n")


def default_workers() -> int:
    """Rendering processes beside the main one: one per core beyond the first, one at least, two
    at most (each figure renders on one core; the statistics keep the main process busy)."""
    return max(1, min(2, (os.cpu_count() or 1) - 1))


class RenderError(RuntimeError):
    """A figure that failed to render (its file and vl-convert's error)."""


class Renderer:
    """Renders figures as they are submitted; ``close()`` waits for every one and raises the
    first failure (a figure that fails to render fails the report). A context manager: leaving it
    on an exception stops the workers (what they had not rendered is not)."""

    def __init__(self, workers: int | None = None) -> None:
        n = default_workers() if workers is None else workers
        import cocoeval

        # the worker imports this very cocoeval (a checkout on sys.path, not an installed one)
        root = str(Path(cocoeval.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        # started now, so that they load vl-convert while the caller reads the run
        self._procs = [subprocess.Popen([sys.executable, "-m", "cocoeval.analysis.render"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, text=True, encoding="utf-8")
                       for _ in range(n)]
        self._submitted = 0

    def submit(self, spec: str, base: Path, scale: float = 2.0) -> None:
        if not self._procs:
            render_figure(spec, base, scale)  # looked up here: tests replace it
            return
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
