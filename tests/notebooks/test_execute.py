"""``execute_notebooks`` runs notebooks two at a time in worker processes: every executed copy is
written (and redacted) as when they ran one after the other, in order, and the first failure is
raised with its error."""

from __future__ import annotations

import json

import pytest

from cocoeval.core.errors import ConfigError

KEY = "sk-test-parallel-0123456789abcdef"


def _notebook(path, code):
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "cells": [
            {
                "id": "params",
                "cell_type": "code",
                "metadata": {"tags": ["parameters"]},
                "execution_count": None,
                "outputs": [],
                "source": "params_file = ''\nfigures_dir = ''\nresamples = 1\nmin_n = 10\ncorrection = ''",
            },
            {"id": "work", "cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": code},
        ],
    }
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
    done = execute_notebooks(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=nbs, jobs=2, only=["03", "01_first"])
    assert [p.name for p in done] == ["01_first.ipynb", "03_third.ipynb"]  # in their own order
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["01_first.ipynb", "03_third.ipynb"]
    assert "03_third ran" in (tmp_path / "out" / "03_third.ipynb").read_text()
    with pytest.raises(ConfigError, match="no notebook named '04', 'second'") as e:
        execute_notebooks(tmp_path / "p.yaml", tmp_path / "out2", notebooks_dir=nbs, only=["02", "04", "second"])
    assert "02_second" in e.value.hint and not (tmp_path / "out2").exists()
