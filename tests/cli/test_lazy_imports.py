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


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["report", "--help"],
        ["check", "params/demo.yaml"],
        ["estimate", "params/demo.yaml"],
    ],
)
def test_commands_that_draw_nothing_import_nothing_heavy(argv):
    assert loaded(*argv) & set(HEAVY) == set()


def test_the_notebooks_command_leaves_the_analysis_to_the_kernels(tmp_path):
    """``cocoeval notebooks`` (copies here; executing, it adds papermill) loads neither the
    analysis nor Altair in its own process: the notebooks' kernels do (it loaded Altair for
    ``copy_notebooks``, a second of every headless notebook's run)."""
    assert loaded("notebooks", "params/demo.yaml", "--copy", str(tmp_path)) & set(HEAVY) == set()
    assert (tmp_path / "02_rq2_vanilla.ipynb").is_file()


def test_help_imports_neither_numpy_nor_pydantic():
    assert loaded("--help") & {"numpy", "pydantic", *HEAVY} == set()


IRI_PROBE = """
import sys
{setup}
import altair, jsonschema
built = "rfc3987_syntax.syntax_helpers" in sys.modules
fc = jsonschema.FormatChecker()
answers = [fc.conforms(x, f) for x in ("http://example.org/caf\u00e9?q=1#x", "http://[::1", "rel/ok", "a b")
           for f in ("iri", "iri-reference")]
print("IRI", built, "iri" in fc.checkers, answers, "rfc3987_syntax.syntax_helpers" in sys.modules)
"""


def _iri(setup: str) -> list[str]:
    p = subprocess.run(
        [sys.executable, "-c", IRI_PROBE.format(setup=setup)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("IRI")), None)
    assert line is not None, p.stderr
    return line.split(" ", 1)[1].split(" ", 2)


def test_the_iri_grammar_is_built_at_its_first_use_with_the_same_answers():
    """Importing ``cocoeval.analysis`` (whose modules import Altair) defers jsonschema's RFC 3987
    grammar (1–4 s at import, for format checks neither Altair nor cocoeval makes) to its first
    use: Altair's import no longer builds it, and a program that checks IRIs gets the answers it
    gets without cocoeval."""
    try:
        import rfc3987_syntax  # noqa: F401
    except ImportError:
        pytest.skip("rfc3987-syntax is not installed here: nothing for jsonschema to build")
    plain = _iri("")
    deferred = _iri("import cocoeval.analysis")
    assert plain[0] == "True" and deferred[0] == "False"  # built at Altair's import, or not
    assert deferred[1:] == plain[1:]  # the same checkers and answers (the grammar then built: last field True)
    assert deferred[2].endswith("True") and "False" in deferred[2] and "True" in deferred[2]


def test_the_analysis_modules_import_scipy_only_when_a_statistic_needs_it():
    """scipy.stats takes a second to import; the notebooks' glue, the report and every analysis
    module never import it (Spearman's ρ of the agreement and of Table 12 rank with numpy and take
    the t distribution from scipy.special, ``agreement.spearman_test``), so neither a notebook's
    first chart (RQ2) nor the report waits for it."""
    probe = (
        "import sys\n"
        "import cocoeval.notebooks.context, cocoeval.analysis.report, cocoeval.analysis.analyses\n"
        "import cocoeval.analysis.rq, cocoeval.analysis.studies, cocoeval.analysis.agreement\n"
        "import cocoeval.analysis.paper_stats, cocoeval.analysis.leaderboard, cocoeval.analysis.judge_check\n"
        "print('SCIPY', 'scipy.stats' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "SCIPY False" in p.stdout, p.stderr
