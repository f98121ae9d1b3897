"""``execute_notebooks`` runs notebooks two at a time in worker processes: every executed copy is
written (and redacted) as when they ran one after the other, in order, and the first failure is
raised with its error."""

from __future__ import annotations

import json

import pytest

from cocoeval.core.errors import ConfigError

KEY = "sk-test-parallel-0123456789abcdef"


def _notebook(path, code):
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
          "cells": [{"id": "params", "cell_type": "code", "metadata": {"tags": ["parameters"]}, "execution_count": None,
                     "outputs": [], "source": "params_file = ''\nfigures_dir = ''\nresamples = 1\nmin_n = 10\ncorrection = ''"},
                    {"id": "work", "cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": code}]}
    path.write_text(json.dumps(nb))


def test_two_at_a_time_the_same_copies_and_the_first_failure_raised(tmp_path, monkeypatch):
    pytest.importorskip("papermill")
    from cocoeval.notebooks.execute import execute_notebooks

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    for name in ("a", "b", "c"):
        _notebook(nbs / f"{name}.ipynb", f"import os\nprint('{name}', resamples, os.environ['OPENAI_API_KEY'])")
    done = execute_notebooks(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=nbs, resamples=7, jobs=2)
    assert [p.name for p in done] == ["a.ipynb", "b.ipynb", "c.ipynb"]
    for name in ("a", "b", "c"):
        text = (tmp_path / "out" / f"{name}.ipynb").read_text()
        assert f"{name} 7 [REDACTED]" in text and KEY not in text
    _notebook(nbs / "b.ipynb", "raise RuntimeError('b broke, key ' + __import__('os').environ['OPENAI_API_KEY'])")
    with pytest.raises(Exception, match="b broke"):
        execute_notebooks(tmp_path / "p.yaml", tmp_path / "out2", notebooks_dir=nbs, jobs=2)
    text = (tmp_path / "out2" / "b.ipynb").read_text()
    assert "b broke, key [REDACTED]" in text and KEY not in text
    assert (tmp_path / "out2" / "a.ipynb").is_file()


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5])
def test_jobs_must_be_a_whole_number_of_at_least_one(tmp_path, jobs):
    from cocoeval.notebooks.execute import execute_notebooks

    with pytest.raises(ConfigError, match="jobs must be a whole number"):
        execute_notebooks(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=tmp_path, jobs=jobs)


def test_only_the_notebooks_named_whole_or_by_number_and_a_wrong_name_runs_nothing(tmp_path):
    pytest.importorskip("papermill")
    from cocoeval.notebooks.execute import execute_notebooks

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    for name in ("01_first", "02_second", "03_third"):
        _notebook(nbs / f"{name}.ipynb", f"print('{name} ran')")
    done = execute_notebooks(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=nbs, jobs=2,
                             only=["03", "01_first"])
    assert [p.name for p in done] == ["01_first.ipynb", "03_third.ipynb"]  # in their own order
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["01_first.ipynb", "03_third.ipynb"]
    assert "03_third ran" in (tmp_path / "out" / "03_third.ipynb").read_text()
    with pytest.raises(ConfigError, match="no notebook named '04', 'second'") as e:
        execute_notebooks(tmp_path / "p.yaml", tmp_path / "out2", notebooks_dir=nbs, only=["02", "04", "second"])
    assert "02_second" in e.value.hint and not (tmp_path / "out2").exists()


def test_the_kernel_is_started_before_papermill_and_imports_the_analysis_silently(tmp_path):
    """``started_kernel`` starts the kernel papermill is given and has it import ``WARM_UP`` at once
    (the notebooks' first import, while this process loads papermill): the executed notebook is as
    without it (counts from 1, no output of the warm-up), and the kernel is gone afterwards."""
    pytest.importorskip("papermill")
    import time

    import psutil
    from jupyter_client.blocking import BlockingKernelClient

    from cocoeval.core.speed import WARM_UP, started_kernel
    from cocoeval.notebooks.execute import execute_notebooks

    assert WARM_UP == "import cocoeval.notebooks.context"
    with started_kernel(str(tmp_path)) as km:
        client = BlockingKernelClient()
        client.load_connection_info(km.get_connection_info())
        client.start_channels()
        seen, deadline = [], time.monotonic() + 120
        try:  # this client never imports it: only the warm-up can have
            client.wait_for_ready(timeout=120)  # as nbclient does before its first request
            while time.monotonic() < deadline and "True" not in seen:
                out: list[str] = []
                try:  # a SUB socket may miss the first messages of a busy kernel (ZeroMQ's slow joiner): ask again
                    client.execute_interactive("import sys, os; print('cocoeval.notebooks.context' in sys.modules,"
                                               " os.getcwd())", timeout=15,
                                               output_hook=lambda m, out=out: out.append(m["content"].get("text", "")))
                except TimeoutError:
                    continue
                seen = "".join(out).split()
        finally:
            client.stop_channels()
        assert seen == ["True", str(tmp_path)]
        pid = km.provisioner.process.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "a.ipynb", "print('ran')")
    execute_notebooks(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=nbs)
    cells = json.loads((tmp_path / "out" / "a.ipynb").read_text())["cells"]
    assert [c["execution_count"] for c in cells if c["cell_type"] == "code"] == [1, 2, 3]  # params, injected, work
    assert [o["text"] for c in cells for o in c["outputs"]] == [["ran\n"]]
