"""Simulation: a setup (``setup``: model × prompt × turns per call × sampling) continues each
instance's history (``engine``), and every continuation gets its status in one place
(``validity``); ``sft`` exports the train split as fine-tuning data and starts
fine-tuning jobs. Never imports judging."""

from cocoeval.core.schema import participant_names

from .engine import SimTask, plan_continuations, simulate
from .setup import Setup
from .sft import SFTConfig, export_sft, sft_examples

__all__ = [
    "SFTConfig",
    "Setup",
    "SimTask",
    "export_sft",
    "participant_names",
    "plan_continuations",
    "sft_examples",
    "simulate",
]
