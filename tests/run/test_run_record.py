"""``Run`` is a plain typed, versioned record (#44 item 1): what reads a run in parts, the memo
and the kept frames are ``analysis.store.RunStore``'s."""

from __future__ import annotations

from pydantic import BaseModel

from cocoeval.analysis.store import RunStore
from cocoeval.run import Run
from cocoeval.run.rundir import RUN_FORMAT

from ..analysis.test_stats import make_run
from ..sim_helpers import write_run_dir


def test_run_overrides_nothing_of_a_pydantic_model_and_has_no_lazy_state():
    for name in ("__getattr__", "__getitem__", "__iter__", "__eq__", "model_dump", "model_dump_json", "model_copy"):
        assert getattr(Run, name, None) is getattr(BaseModel, name, None), name
    assert not Run.__private_attributes__  # no state besides the fields
    for gone in ("load", "state", "as_read", "digest"):
        assert not hasattr(Run, gone), gone


def test_a_run_read_whole_equals_the_store_read_whole_and_copies_and_dumps_as_a_model(tmp_path):
    d = tmp_path / "run"
    write_run_dir(d, make_run(), {"status": "complete"})
    run = Run.open(d)
    assert run == Run.open(d) == RunStore.open(d).run()
    assert run.model_copy() == run and Run.model_validate_json(run.model_dump_json()) == run
    assert run.manifest.format == RUN_FORMAT


def test_an_old_manifest_without_a_format_opens_in_a_store_as_format_one(tmp_path):
    d = tmp_path / "run"
    write_run_dir(d, make_run(), {"status": "complete"})
    assert '"format"' not in (d / "manifest.json").read_text()  # as written before the format was versioned
    store = RunStore.open(d)
    assert store.manifest.format == 1 and store.unread == {"instances", "continuations", "judgments", "human"}
    assert store.run().instances == Run.open(d).instances
