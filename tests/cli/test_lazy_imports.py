"""Commands that draw nothing import nothing heavy (issue #27): ``cocoeval --help``, ``run
--help``, ``check`` and ``estimate`` never load Altair, vl-convert, scipy, polars, papermill or
ipywidgets; ``--help`` not even numpy or pydantic. Each runs in a fresh interpreter, which then
lists the heavy modules it holds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..conftest import ROOT

HEAVY = ("altair", "vl_convert", "scipy", "polars", "papermill", "ipywidgets", "IPython")
PROBE = """
import sys
from cocoeval.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", *sorted({m.split(".")[0] for m in sys.modules}))
"""


def loaded(*argv: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("LOADED"))
    return set(line.split()[1:])


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["report", "--help"],
                                  ["check", "params/demo.yaml"], ["estimate", "params/demo.yaml"]])
def test_commands_that_draw_nothing_import_nothing_heavy(argv):
    assert loaded(*argv) & set(HEAVY) == set()


def test_help_imports_neither_numpy_nor_pydantic():
    assert loaded("--help") & {"numpy", "pydantic", *HEAVY} == set()


def test_help_is_quick():
    """``python -X importtime -m cocoeval --help``: the imports take well under the 0.5 s target
    (asserted loosely, 2 s: shared machines are slow; benchmarks/paper_scale.py prints the time)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "cocoeval", "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0
    total = sum(int(ln.split("|")[1]) for ln in out.stderr.splitlines()
                if ln.startswith("import time:") and ln.split("|")[2].strip() and not ln.split("|")[2].startswith("  ")
                and ln.split("|")[1].strip().isdigit())
    assert total < 2_000_000, f"{total / 1e6:.2f} s of imports"
