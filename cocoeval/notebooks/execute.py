"""The shipped notebooks: copies for interactive use (``cocoeval notebooks PARAMS --copy DIR``) and
headless execution with papermill (``cocoeval notebooks PARAMS --out``):
two at a time on a machine with two cores or more, each in a worker process of its own (its
kernel and the notebook's own work run beside the other's), the executed copies redacted of API
keys whatever happens. Light to import: a worker loads papermill, not the analysis."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from cocoeval.analysis import inference
from cocoeval.core.jsonio import write_atomic


def shipped_notebooks() -> Path:
    """The notebooks' folder: the package data ``cocoeval.notebooks.shipped``, which is the
    checkout's top-level ``notebooks/`` (pyproject.toml maps it; an editable install reads it in
    place, a wheel carries a copy)."""
    from importlib.resources import files

    try:
        nb_dir = Path(str(files("cocoeval.notebooks.shipped")))
    except ModuleNotFoundError:
        nb_dir = None
    if nb_dir is None or not any(nb_dir.glob("*.ipynb")):
        from cocoeval.core.errors import NotFoundError

        raise NotFoundError(
            f"no notebooks in {nb_dir or 'cocoeval.notebooks.shipped'}",
            hint="reinstall cocoeval (pip install -e . in a checkout: the wheel ships them as package "
            "data), or write them with python -m cocoeval.notebooks.generate",
        )
    return nb_dir


def copy_notebooks(params_file: str | Path, dest: str | Path, *, figures_dir: str | Path | None = None) -> list[Path]:
    """Copy the shipped notebooks into ``dest`` for interactive use (e.g. ``jupyter lab DEST``),
    with ``params_file`` (and ``figures_dir``) set in each parameters cell, as paths relative to
    ``dest`` where they can be. Existing notebooks of the same name are replaced."""
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)

    def rel(path: str | Path) -> str:
        try:
            return Path(os.path.relpath(Path(path).resolve(), out.resolve())).as_posix()
        except ValueError:  # another drive on Windows
            return str(Path(path).resolve())

    values = {"params_file": rel(params_file), **({"figures_dir": rel(figures_dir)} if figures_dir else {})}
    done = []
    for nb in sorted(shipped_notebooks().glob("*.ipynb")):
        doc = json.loads(nb.read_text(encoding="utf-8"))
        for cell in doc["cells"]:
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                cell["source"] = _set_parameters("".join(cell["source"]), values)
        target = out / nb.name
        write_atomic(target, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        done.append(target)
    return done


def _set_parameters(source: str, values: dict[str, str]) -> str:
    """Set ``name: str = "..."`` lines of a parameters cell to new string values (comments kept)."""
    import re

    for name, value in values.items():

        def quoted(m: re.Match[str], v: str = value) -> str:
            return m.group(1) + json.dumps(v)

        source, n = re.subn(rf'^({re.escape(name)}: str = )"[^"\n]*"', quoted, source, count=1, flags=re.M)
        if n != 1:
            raise RuntimeError(
                f"the notebooks' parameters cell has no {name} line"
            )  # a bug of cocoeval.notebooks.generate
    return source


def notebook_jobs() -> int:
    """Notebooks executed at once by default: two on two cores or more (a notebook is mostly one
    busy core: its kernel's Python), else one."""
    return max(1, min(2, os.cpu_count() or 1))


def execute_notebooks(
    params_file: str | Path,
    out_dir: str | Path,
    *,
    figures_dir: str | Path | None = None,
    notebooks_dir: str | Path | None = None,
    resamples: int = 1000,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
    jobs: int | None = None,
    only: Sequence[str] | None = None,
) -> list[Path]:
    """Execute every notebook headlessly with papermill on a params file's run; executed copies go
    to ``out_dir`` and figures to ``figures_dir/<notebook>/`` (default: the run's ``figures/``).
    ``jobs`` notebooks at once (default ``notebook_jobs()``; 1: one after the other in this
    process; a single notebook always runs in this process). ``only``: the notebooks to execute,
    each named whole (``05_rq5_turns_per_call``) or by the number it starts with (``05``); a name
    that matches none raises before anything runs. The first notebook that fails (in their order)
    raises once those running have ended; the notebooks after it are not started."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        from cocoeval.core.errors import ConfigError

        raise ConfigError(
            f"jobs must be a whole number of at least 1, not {jobs!r}",
            hint="--jobs 1 runs the notebooks one after the other",
        )

    nb_dir = Path(notebooks_dir) if notebooks_dir else shipped_notebooks()
    chosen = selected(sorted(nb_dir.glob("*.ipynb")), only)  # a wrong name: nothing written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parameters = {
        "params_file": str(Path(params_file).resolve()),
        "figures_dir": str(Path(figures_dir).resolve()) if figures_dir else "",
        "resamples": resamples,
        "min_n": min_n,
        "correction": correction,
    }
    todo = [(str(nb), str(out / nb.name)) for nb in chosen]
    n = notebook_jobs() if jobs is None else jobs
    if n <= 1 or len(todo) <= 1:
        return [Path(_execute_one(nb, target, str(nb_dir), parameters)) for nb, target in todo]
    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures: list[Future[str]] = [
            pool.submit(_execute_one, nb, target, str(nb_dir), parameters) for nb, target in todo
        ]
        return [Path(f.result()) for f in futures]
    finally:  # after a failure: the notebooks not started are cancelled, those running end
        pool.shutdown(wait=True, cancel_futures=True)


def selected(notebooks: list[Path], only: Sequence[str] | None) -> list[Path]:
    """The ``notebooks`` ``only`` names (all of them for None), in their own order: a name is a
    notebook's whole stem or the part before its first underscore (``05``)."""
    if only is None:
        return notebooks
    names = {nb.stem: nb for nb in notebooks} | {nb.stem.split("_")[0]: nb for nb in notebooks}
    unknown = [n for n in only if n not in names]
    if unknown:
        from cocoeval.core.errors import ConfigError

        raise ConfigError(
            f"no notebook named {', '.join(map(repr, unknown))}",
            hint="name one as " + ", ".join(nb.stem for nb in notebooks) + " (or by its number, e.g. 05)",
        )
    chosen = {names[n] for n in only}
    return [nb for nb in notebooks if nb in chosen]


def _execute_one(nb: str, target: str, cwd: str, parameters: dict[str, Any]) -> str:
    try:
        import papermill as pm

        # written once, when it ends (or fails), not twice per cell: each write validates
        # the whole notebook (~0.05 s for 1.6 MB)
        pm.execute_notebook(
            nb,
            target,
            cwd=cwd,
            kernel_name="python3",
            progress_bar=False,
            parameters=parameters,
            request_save_on_cell_execute=False,
        )
    finally:  # a failed notebook is written too, with the traceback that may hold a key
        redact_outputs(Path(target))
    return target


def redact_outputs(path: Path) -> None:
    """Redact API keys and credential-shaped text (``secrets.redact``) in the outputs of an
    executed notebook (cell sources are left as they are; images are not text)."""
    from cocoeval.llm.secrets import redact

    if not path.is_file():
        return
    nb = json.loads(path.read_text(encoding="utf-8"))

    def clean(x: Any, mime: str = "") -> Any:
        if mime.startswith("image/") and not mime.startswith("image/svg"):
            return x
        if isinstance(x, str):
            return redact(x)
        if isinstance(x, list):
            return [clean(v, mime) for v in x]
        if isinstance(x, dict):
            return {k: clean(v, k if "/" in k else mime) for k, v in x.items()}
        return x

    for cell in nb.get("cells", []):
        if cell.get("outputs"):
            cell["outputs"] = clean(cell["outputs"])
    write_atomic(path, json.dumps(nb, ensure_ascii=False, indent=1) + "\n")
