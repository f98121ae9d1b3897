"""Figures rendered to PNG and SVG in worker processes while the report computes.

vl-convert holds the GIL while it renders (measured: a Python loop beside a render in another
thread waits for the whole render), so a rendering *thread* serialises with the statistics instead
of overlapping them; and two threads in vl-convert can deadlock with the GIL. A worker *process*
has its own GIL: the report's ~20 s of rendering on the paper's shape runs beside its statistics.

Each worker is its own single-process pool and figure ``i`` goes to worker ``i mod n``: every
worker renders a fixed sequence, so the ids vl-convert numbers in its SVGs (gradients, clip
paths: counted per process) are the same from one report to the next. The workers are spawned
(never forked: polars' thread pool does not survive a fork) and import only this module and
vl-convert. ``workers=0`` renders in the calling process, in order (the path tests compare with)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType


def render_figure(spec: str, base: str | Path, scale: float = 2.0) -> None:
    """``<base>.png`` and ``.svg`` of a Vega-Lite ``spec`` (JSON text) and the spec itself as
    ``<base>.vl.json`` (what the HTML report embeds). One compilation to Vega and one render, to
    SVG; the PNG is rasterised from that SVG, which is what vl-convert's own PNG path does after
    rendering the chart a second time: the same PNG bytes (tested), a third of the time."""
    import vl_convert as vlc

    base = Path(base)
    base.parent.mkdir(parents=True, exist_ok=True)
    svg = vlc.vega_to_svg(vlc.vegalite_to_vega(spec))
    (base.parent / f"{base.name}.png").write_bytes(vlc.svg_to_png(svg, scale=scale))
    (base.parent / f"{base.name}.svg").write_text(svg, encoding="utf-8")
    (base.parent / f"{base.name}.vl.json").write_text(spec, encoding="utf-8")


def _warm() -> None:
    """A worker's first task: load vl-convert before the first figure arrives."""
    import vl_convert  # noqa: F401


def default_workers() -> int:
    """Rendering processes beside the main one: one per core beyond the first, one at least, two
    at most (each figure renders on one core; the statistics keep the main process busy)."""
    return max(1, min(2, (os.cpu_count() or 1) - 1))


class Renderer:
    """Renders figures as they are submitted; ``close()`` waits for every one and raises the
    first failure (a figure that fails to render fails the report). A context manager: leaving it
    on an exception cancels what has not started and stops the workers."""

    def __init__(self, workers: int | None = None) -> None:
        n = default_workers() if workers is None else workers
        ctx = multiprocessing.get_context("spawn")
        self._pools = [ProcessPoolExecutor(max_workers=1, mp_context=ctx) for _ in range(n)]
        # started now (a pool starts its process at the first task), so that they load vl-convert
        # while the caller reads the run
        self._futures: list[Future[None]] = [p.submit(_warm) for p in self._pools]
        self._submitted = 0

    def submit(self, spec: str, base: Path, scale: float = 2.0) -> None:
        if not self._pools:
            render_figure(spec, base, scale)  # looked up here: tests replace it
            return
        pool = self._pools[self._submitted % len(self._pools)]
        self._submitted += 1
        self._futures.append(pool.submit(render_figure, spec, str(base), scale))

    def close(self) -> None:
        for p in self._pools:
            p.shutdown(wait=True)
        for f in self._futures:
            f.result()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
            return
        for p in self._pools:
            p.shutdown(wait=True, cancel_futures=True)
