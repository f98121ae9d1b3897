"""A run: its params (``params``: schema and loading), the stage runner (``stages``) and the run
directory (``rundir``: ``Manifest``, ``Run``, ``Run.open`` and the write helpers)."""

from .params import BuildSection, ExperimentParams, InstanceSelection, read_params
from .rundir import Manifest, Run, read_run
from .stages import Experiment, load_params

__all__ = ["BuildSection", "Experiment", "ExperimentParams", "InstanceSelection", "Manifest", "Run",
           "load_params", "read_params", "read_run"]
