"""The hostile classes of issue #24, a fixed sample of ``benchmarks/hostile.py``'s campaign: each
case mutates one input (params YAML, benchmark, instances, continuations, judgments, manifest,
usage.json and its journal, annotation CSV and key, call cache, source folder) and runs the real
command line on it. None may end in an internal error (exit 1, a traceback), a hang, or a silent
wrong (the bad data accepted and counted). ``python benchmarks/hostile.py`` runs every case."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from .conftest import ROOT


def _campaign():
    spec = importlib.util.spec_from_file_location("hostile_campaign", ROOT / "benchmarks" / "hostile.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


hostile = _campaign()


def test_the_sample_names_existing_cases_of_every_surface():
    names = {c.name for c in hostile.cases()}
    assert set(hostile.SAMPLE) <= names, sorted(set(hostile.SAMPLE) - names)
    assert {n.split("/")[0] for n in hostile.SAMPLE} == {s.name for s in hostile.SURFACES}


@pytest.mark.slow
def test_a_fixed_sample_of_hostile_inputs_gives_no_internal_error_hang_or_silent_wrong(server):
    chosen = [c for c in hostile.cases() if c.name in hostile.SAMPLE]
    outcomes = hostile.campaign(chosen, jobs=2, timeout=30, srv=server)
    bad = [o for o in outcomes if o.cls in ("internal", "hang", "silent", "harness")]
    assert not bad, f"{len(bad)} of {len(outcomes)} cases:\n" + hostile.failures(bad) + "\n" + hostile.table(outcomes)
