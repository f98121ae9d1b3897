"""Simulation: a setup (``setup``: model × prompt × turns per call × sampling) continues each
instance's history (``engine``); ``sft`` exports the train split as fine-tuning data and starts
fine-tuning jobs. Never imports judging."""

from .engine import SimTask, plan_continuations, simulate
from .setup import Setup, participant_names
from .sft import SFTConfig, export_sft, sft_examples

__all__ = ["SFTConfig", "Setup", "SimTask", "export_sft", "participant_names", "plan_continuations", "sft_examples", "simulate"]
