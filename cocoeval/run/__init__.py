"""A run: its params (``params``: schema and loading), the stage runner (``stages``: build,
simulate, judge into a run directory), the run directory (``rundir``: ``Manifest``, ``Run``,
``Run.open`` and the write helpers), the human annotators' stores in it (``humans``), the
forecast of calls and cost (``estimate``: it drives the very task objects that send the calls),
what a run ended with (``outcome``) and the one-run-at-a-time lock (``lock``)."""

from .params import BuildSection, ExperimentParams, InstanceSelection, read_params
from .rundir import Manifest, Run, git_revision
from .stages import Experiment, load_params

__all__ = [
    "BuildSection",
    "Experiment",
    "ExperimentParams",
    "InstanceSelection",
    "Manifest",
    "Run",
    "git_revision",
    "load_params",
    "read_params",
]
