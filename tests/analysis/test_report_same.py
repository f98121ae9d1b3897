"""``cocoeval report`` writes the same files as before issue #27 made it fast: on a small run of
the paper's shape, every table (CSV and Markdown), the index and every figure (PNG and SVG) of the
report equal, byte for byte, those of the implementation it replaced (the judge-free statistics one
conversation at a time, sign vectors drawn per test and each test on its own, no shared frames, figures
rendered one after the other by vl-convert's own PNG and SVG paths, BLAS on the threads numpy starts
with, every chart part checked by Altair at its creation, each spec written by Altair's ``to_json``
whole). The figures of both are rendered with the fonts of cocoeval's rendering processes
(``render.use_bundled_fonts``)."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
from dataclasses import replace

from cocoeval.analysis import charts, frames, inference, render, report, stats, store
from cocoeval.analysis.report import write_report
from cocoeval.core import speed

from ..conftest import ROOT
from . import convstats_reference as ref


def paper_scale():
    spec = importlib.util.spec_from_file_location("paper_scale", ROOT / "benchmarks" / "paper_scale.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("paper_scale", mod)
    spec.loader.exec_module(mod)
    return mod


def files(d):
    """Every file's bytes; in SVGs the gradient and clip ids, numbered by vl-convert in the order
    figures are rendered in one process (two renders of one chart differ so), are left out."""
    return {
        p.relative_to(d).as_posix(): re.sub(rb"(gradient_|clip)\d+", rb"\1#", p.read_bytes())
        if p.suffix == ".svg"
        else p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def test_report_is_the_same_as_before(tmp_path, monkeypatch):
    run = tmp_path / "run"
    paper_scale().write_paper_run(run, per_dataset=11, chats=3, turns_n=8)
    write_report(run, tmp_path / "now", resamples=200)
    write_report(run, tmp_path / "again", resamples=200)  # served from the caches: the same
    with monkeypatch.context() as m:
        m.setitem(
            store.DERIVED,
            "convstats",
            replace(store.DERIVED["convstats"], make=lambda run, _tax: ref.conversation_frame(run)),
        )
        m.setattr(frames, "per_run", lambda run, what, make: make())
        m.setattr(store, "per_run", lambda run, what, make: make())
        m.setattr(stats, "sign_flip_pvalues", ref.sign_flip_pvalues)
        m.setattr(inference, "sign_flip_pvalues", ref.sign_flip_pvalues)
        one_by_one = lambda blocks, flips, seed: [ref.sign_flip_pvalues(b, flips, seed) for b in blocks]  # noqa: E731
        m.setattr(stats, "sign_flip_blocks", one_by_one)
        m.setattr(render, "Renderer", ref.OneByOneRenderer)
        m.setattr(report, "kept_report_folder", lambda run, settings: None)  # computed, not the copy kept by "now"
        m.setattr(charts, "checked_once", contextlib.nullcontext)
        m.setattr(speed, "one_blas_thread", contextlib.nullcontext)
        m.setattr(charts, "unchecked_json", lambda chart: chart.to_json(validate=False))
        write_report(run, tmp_path / "before", resamples=200)
    now, before = files(tmp_path / "now"), files(tmp_path / "before")
    assert sorted(now) == sorted(before) and any(k.endswith(".svg") for k in now)
    assert [k for k in now if now[k] != before[k]] == []
    assert files(tmp_path / "again") == now
