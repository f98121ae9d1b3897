"""Commands that draw nothing import nothing heavy (issue #27; the times: benchmarks/paper_scale.py): ``cocoeval --help``, ``run
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


def test_the_command_skips_the_iri_grammar_a_program_calling_main_keeps_it(tmp_path):
    """The ``cocoeval`` command (argv from the command line) never builds jsonschema's RFC 3987
    grammar (3.3 s at import, for format checks cocoeval never makes); ``main(argv)`` called by a
    program, like a notebook kernel, leaves that program's modules alone."""
    probe = ("import sys; from cocoeval.cli import main\n"
             "sys.argv = ['cocoeval', 'report', '--help']\n"
             "try:\n    main({argv})\nexcept SystemExit:\n    pass\n"
             "import altair, jsonschema\n"
             "print('IRI', 'iri' in jsonschema.FormatChecker().checkers)")
    cmd = subprocess.run([sys.executable, "-c", probe.format(argv="")], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    lib = subprocess.run([sys.executable, "-c", probe.format(argv="['report', '--help']")], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert "IRI False" in cmd.stdout, cmd.stderr
    try:
        import rfc3987_syntax  # noqa: F401
    except ImportError:
        pytest.skip("rfc3987-syntax is not installed here: nothing for jsonschema to build")
    assert "IRI True" in lib.stdout, lib.stderr
