"""Compatibility module: the old home of the params schema, the stage runner and ``read_run``.

Use ``cocoeval.run`` (``load_params``, ``Experiment``, ``Run.open``). ``read_run`` returns a
``Run``; its dict-style access (``run["judgments"]``) is deprecated.
"""

from __future__ import annotations

from .run.params import BuildSection, ExperimentParams, InstanceSelection, read_params
from .run.rundir import Manifest, Run, git_revision, read_run
from .run.stages import Experiment, load_params

__all__ = ["BuildSection", "Experiment", "ExperimentParams", "InstanceSelection", "Manifest", "Run",
           "git_revision", "load_params", "read_params", "read_run"]
