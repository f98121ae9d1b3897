"""Judging: a judge (``config``) judges the human reference and every continuation of an instance
(``engine``), overall (1–10 scores) and turn by turn (behaviours); ``parse`` validates its
answers strictly. Never imports simulation."""

from .config import PROMPTS, JudgeConfig, Kind, fine_schema
from .engine import JudgeTask, judge, plan_judgments, send_order
from .parse import Verdict, map_behaviour, validate_fine, validate_overall

__all__ = [
    "PROMPTS",
    "JudgeConfig",
    "JudgeTask",
    "Kind",
    "Verdict",
    "fine_schema",
    "judge",
    "map_behaviour",
    "plan_judgments",
    "send_order",
    "validate_fine",
    "validate_overall",
]
