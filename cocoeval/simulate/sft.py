"""Supervised fine-tuning data: the train split as OpenAI fine-tuning chat JSONL (paper A.4).

The training set: ``total`` (1,450, Table 2 / A.4) train instances from the ``n_datasets`` (4)
datasets with the most train conversations, or the datasets named in ``datasets`` (the paper's
text does not name its four); split over them in proportion to the train instances each has
(largest remainder; the text gives only the total), drawn with a seed. The same instances make
every file.

One file per k (turns per call: 1, 5, 30), each with one example per instance. Each example is
one simulation step with the same prompt the simulator gets: for k < the reference length a
random starting turn j per instance (seeded); the gold turns before j stand as "turns written
so far", and the assistant answer is the next k human turns. Training is one epoch
(``n_epochs=1``; A.4: "for one epoch with the default parameters"). A fine-tuned model id is
then just another simulator model spec (``openai/ft:gpt-4.1-...``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.errors import CocoevalError, ConfigError, InputError
from cocoeval.core.jsonio import iter_jsonl, write_jsonl
from cocoeval.core.schema import Instance
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.llm.usage import count_tokens, token_method
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import format_behaviours, format_turns, step_messages

ROLES = {"system", "user", "assistant"}
DEFAULT_MAX_EXAMPLE_TOKENS = 65_536
"""OpenAI's training context for gpt-4.1 fine-tuning; pass the limit of your base model."""
PAPER_TOTAL = 1450
"""Training instances in the paper (Table 2, A.4), the same for k = 1, 5 and 30."""
PAPER_N_DATASETS = 4


class SFTConfig(BaseModel):
    """The ``sft:`` section of a params file (``cocoeval sft-export PARAMS.yaml``); the
    defaults are the paper's (A.4)."""

    model_config = ConfigDict(extra="forbid")

    total: int = Field(PAPER_TOTAL, ge=1, le=10_000_000, strict=True)
    """Training instances (1,450 in the paper), the same instances for every k."""
    datasets: list[str] | None = None
    """The datasets to train on (None: the ``n_datasets`` with the most train conversations,
    computed and printed; the paper's text says four but does not name them)."""
    n_datasets: int = Field(PAPER_N_DATASETS, ge=1, le=1_000, strict=True)
    """How many datasets when ``datasets`` is None."""
    ks: list[Annotated[int, Field(ge=1, le=1_000, strict=True)]] = Field(
        default_factory=lambda: [1, 5, 30], min_length=1
    )
    """Turns per call: one training file (and one fine-tuned model) per k; each a whole number
    from 1 to 1,000 as a setup's ``turns_per_call`` (``true`` is not 1)."""
    prompt: str = "vanilla"
    """The simulation prompt the examples use (the simulator's prompt at inference)."""
    seed: int = Field(0, strict=True)
    """Seed of the instance draw and of the random starting turns."""
    n_epochs: int = Field(1, ge=1, le=50, strict=True)
    """Training epochs (A.4: one)."""
    base_model: str = "gpt-4.1-2025-04-14"
    """The model fine-tuned (C.1: gpt-4.1 2025-04-14)."""


@dataclass(frozen=True)
class DatasetTake:
    """One dataset of the SFT training set: what it has and what was taken."""

    conversations: int
    """Its train conversations (what the datasets are ranked by)."""
    available: int
    """Its train instances (what the total is split in proportion to)."""
    taken: int
    """Its instances in the training set."""


@dataclass(frozen=True)
class SftSelection:
    """How ``training_set`` chose the SFT training instances (``sft_report.json``'s ``selection``)."""

    rule: str
    """How the datasets were chosen (the most train conversations, or given)."""
    datasets: list[str]
    """The datasets chosen, in order."""
    total_asked: int | None
    """Instances asked for (None: every instance of the chosen datasets)."""
    total: int
    """Instances chosen."""
    split: str
    """How the total was split over the datasets."""
    per_dataset: dict[str, DatasetTake]
    """{dataset: conversations, instances available, instances taken}, the chosen datasets."""
    left_out: dict[str, int]
    """{dataset not chosen: its train instances}."""
    shortfall: str | None = None
    """Why fewer instances were chosen than asked for (a warning); None when none are missing."""

    def to_json(self) -> dict[str, Any]:
        """The form ``sft_report.json`` keeps (``shortfall`` only when there is one)."""
        return {
            "rule": self.rule,
            "datasets": self.datasets,
            "total_asked": self.total_asked,
            "total": self.total,
            "split": self.split,
            "per_dataset": {d: dataclasses.asdict(t) for d, t in self.per_dataset.items()},
            "left_out": self.left_out,
            **({"shortfall": self.shortfall} if self.shortfall is not None else {}),
        }


@dataclass(frozen=True)
class SftFileCheck:
    """What ``validate_sft_file`` found in a chat fine-tuning file."""

    file: str
    """The file checked."""
    examples: int
    """Its examples with a well-formed message list."""
    tokens: int
    """Their tokens in all (``token_method``): what training is billed by."""
    max_example_tokens: int
    """The tokens of the largest example (the fine-tuning API refuses one over its limit)."""
    token_method: str
    """How tokens were counted (a tokenizer, or an estimate)."""
    problems: list[str]
    """Every problem found, each naming the file and line."""
    valid: bool
    """No problem and at least one example: the file can be uploaded."""

    def to_json(self) -> dict[str, Any]:
        """The form ``sft_report.json`` keeps under ``files``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SftExport:
    """What ``export_sft`` wrote (``sft_report.json``)."""

    instances: int
    """The training instances, the same for every k."""
    selection: SftSelection
    """How they were chosen."""
    prompt: str
    """The simulation prompt of the examples (its name and version)."""
    seed: int
    """The seed of the draw and of each example's starting turn."""
    files: dict[str, SftFileCheck]
    """{k: the check of ``sft_k{k}.jsonl``}."""

    def to_json(self) -> dict[str, Any]:
        """The form ``sft_report.json`` keeps."""
        return {
            "instances": self.instances,
            "selection": self.selection.to_json(),
            "prompt": self.prompt,
            "seed": self.seed,
            "files": {k: f.to_json() for k, f in self.files.items()},
        }


def select_training_set(
    instances: Sequence[Instance],
    *,
    total: int | None = PAPER_TOTAL,
    datasets: Sequence[str] | None = None,
    n_datasets: int = PAPER_N_DATASETS,
    seed: int = 0,
) -> tuple[list[Instance], SftSelection]:
    """The SFT training instances and how they were chosen: datasets (given, or the
    ``n_datasets`` with the most train conversations: ties by instances, then name), and per
    dataset the conversations, instances available and instances taken (in proportion to the
    instances available, largest remainder). ``total=None`` takes every instance. Human–AI chats
    are left out (the fine-tuned simulator plays all participants of a multi-party meeting)."""
    pool = [i for i in instances if i.provenance.source_format != "chat"]
    by_ds: dict[str, list[Instance]] = {}
    for inst in sorted(pool, key=lambda i: i.id):
        by_ds.setdefault(inst.dataset, []).append(inst)
    convs = {d: len({i.provenance.conversation_id for i in xs}) for d, xs in by_ds.items()}
    if datasets is None:
        ranked = sorted(by_ds, key=lambda d: (-convs[d], -len(by_ds[d]), d))
        chosen, rule = ranked[:n_datasets], f"the {n_datasets} datasets with the most train conversations"
    else:
        missing = [d for d in datasets if d not in by_ds]
        if missing:
            raise InputError(
                f"no train instances of dataset(s) {', '.join(missing)}",
                hint=f"the train split has: {', '.join(sorted(by_ds)) or '(nothing)'}; fix sft.datasets / --datasets",
            )
        chosen, rule = list(dict.fromkeys(datasets)), "given (sft.datasets)"
    avail = sum(len(by_ds[d]) for d in chosen)
    want = avail if total is None else min(total, avail)
    quota = {d: want * len(by_ds[d]) // avail if avail else 0 for d in chosen}
    for d in sorted(chosen, key=lambda d: (-(want * len(by_ds[d]) % max(avail, 1)), d))[: want - sum(quota.values())]:
        quota[d] += 1
    rng = random.Random(f"{seed}/sft/instances")
    out = [x for d in chosen for x in rng.sample(by_ds[d], quota[d])]
    shortfall = (
        f"only {len(out)} train instances in {', '.join(chosen)}, fewer than the "
        f"{total} asked for (the paper trained on {PAPER_TOTAL})"
        if total is not None and len(out) < total
        else None
    )
    report = SftSelection(
        rule=rule,
        datasets=chosen,
        total_asked=total,
        total=len(out),
        split="proportional to the train instances of each dataset (largest remainder)",
        per_dataset={d: DatasetTake(convs[d], len(by_ds[d]), quota[d]) for d in chosen},
        left_out={d: len(by_ds[d]) for d in sorted(by_ds) if d not in chosen},
        shortfall=shortfall,
    )
    return sorted(out, key=lambda i: i.id), report


def training_set(
    instances: Sequence[Instance],
    *,
    total: int | None = PAPER_TOTAL,
    datasets: Sequence[str] | None = None,
    n_datasets: int = PAPER_N_DATASETS,
    seed: int = 0,
) -> tuple[list[Instance], dict[str, Any]]:
    """``select_training_set`` with the selection in its JSON form (``SftSelection.to_json``), as
    the RQ4 notebook's first cell (``analysis.analyses.SFT_PRELUDE``) reads it."""
    chosen, selection = select_training_set(instances, total=total, datasets=datasets, n_datasets=n_datasets, seed=seed)
    return chosen, selection.to_json()


def sft_examples(
    instances: Sequence[Instance], k: int, *, prompt: str = "vanilla", seed: int = 0, taxonomy: Taxonomy | None = None
) -> list[dict[str, Any]]:
    p = load_prompt(prompt)
    behaviours = format_behaviours(taxonomy or load_taxonomy())
    rng = random.Random(f"{seed}/sft/{k}")
    out = []
    for inst in sorted(instances, key=lambda i: i.id):
        n = len(inst.reference)
        kk = min(k, n)
        j = 0 if kk >= n else rng.randint(0, n - kk)
        msgs = step_messages(p, inst, inst.reference[:j], kk, behaviours=behaviours)
        target = format_turns(inst.reference[j : j + kk])
        out.append({"messages": [m.model_dump() for m in msgs] + [{"role": "assistant", "content": target}]})
    return out


def validate_sft_file(path: str | Path, max_example_tokens: int = DEFAULT_MAX_EXAMPLE_TOKENS) -> SftFileCheck:
    """Check a chat fine-tuning file: roles, shape, token counts per example, with every problem
    found (file, line, what)."""
    problems: list[str] = []
    tokens: list[int] = []
    for n, obj in iter_jsonl(path):
        where = f"{path} line {n}"
        msgs = obj.get("messages") if isinstance(obj, dict) else None
        if not isinstance(msgs, list) or not msgs:
            problems.append(f"{where}: no 'messages' list")
            continue
        bad = [
            i
            for i, m in enumerate(msgs)
            if not isinstance(m, dict)
            or m.get("role") not in ROLES
            or not isinstance(m.get("content"), str)
            or not m["content"].strip()
        ]
        if bad:
            problems.append(f"{where}: message(s) {bad} need a role in {sorted(ROLES)} and non-empty content")
            continue
        roles = [m["role"] for m in msgs]
        if "user" not in roles or roles[-1] != "assistant":
            problems.append(f"{where}: needs a user message and must end with the assistant's answer")
        t = sum(count_tokens(m["content"]) + 4 for m in msgs)
        tokens.append(t)
        if t > max_example_tokens:
            problems.append(f"{where}: {t} tokens, over the {max_example_tokens}-token limit")
    return SftFileCheck(
        file=str(path),
        examples=len(tokens),
        tokens=sum(tokens),
        max_example_tokens=max(tokens, default=0),
        token_method=token_method(),
        problems=problems,
        valid=not problems and bool(tokens),
    )


def export_sft(
    instances: Sequence[Instance],
    out_dir: str | Path,
    *,
    ks: Sequence[int] = (1, 5, 30),
    prompt: str = "vanilla",
    seed: int = 0,
    taxonomy: Taxonomy | None = None,
    max_example_tokens: int = DEFAULT_MAX_EXAMPLE_TOKENS,
    total: int | None = PAPER_TOTAL,
    datasets: Sequence[str] | None = None,
    n_datasets: int = PAPER_N_DATASETS,
) -> SftExport:
    """Choose the training set (``select_training_set``), write ``sft_k{k}.jsonl`` for each k from the
    same instances, validate them, and return the report (written as ``sft_report.json``)."""
    out = Path(out_dir)
    chosen, selection = select_training_set(instances, total=total, datasets=datasets, n_datasets=n_datasets, seed=seed)
    if not chosen:
        raise InputError(
            "no multi-party train instances to export",
            hint="build with a train split (--eval-share below 1, --train-per-dataset above 0)",
        )
    files = {}
    for k in ks:
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        path = out / f"sft_k{k}.jsonl"
        write_jsonl(path, sft_examples(chosen, k, prompt=prompt, seed=seed, taxonomy=taxonomy))
        files[str(k)] = validate_sft_file(path, max_example_tokens)
    report = SftExport(
        instances=len(chosen), selection=selection, prompt=load_prompt(prompt).ref, seed=seed, files=files
    )
    (out / "sft_report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


def export_summary(report: SftExport, cfg: SFTConfig) -> list[str]:
    """What ``cocoeval sft-export`` prints: the training set chosen (datasets, rule, split), each
    file, and how to train (a line starting with "warning" when instances are short)."""
    sel = report.selection
    out = [
        f"training set: {sel.total} instances from {', '.join(sel.datasets)} ({sel.rule}; {sel.split}): "
        + ", ".join(
            f"{d} {v.taken} of {v.available} ({v.conversations} conversations)" for d, v in sel.per_dataset.items()
        )
    ]
    if sel.left_out:
        out.append("left out: " + ", ".join(f"{d} ({n} instances)" for d, n in sel.left_out.items()))
    if sel.shortfall is not None:
        out.append(f"warning: {sel.shortfall}")
    for k, f in report.files.items():
        state = "valid" if f.valid else f"INVALID: {'; '.join(f.problems[:3])}"
        out.append(
            f"k={k:>2}: {f.file}: {f.examples} examples, {f.tokens} tokens "
            f"(largest {f.max_example_tokens}; {f.token_method}) — {state}"
        )
    out.append(
        f"train each with: cocoeval finetune FILE --model {cfg.base_model} --n-epochs {cfg.n_epochs} "
        "--suffix cocoeval-kK"
    )
    return out


def start_finetune(
    path: str | Path,
    model: str,
    *,
    suffix: str | None = None,
    seed: int | None = None,
    n_epochs: int | None = 1,
    base_url: str | None = None,
    max_retries: int = 5,
) -> dict[str, Any]:
    """Upload a training file and start an OpenAI supervised fine-tuning job (key from
    OPENAI_API_KEY) for ``n_epochs`` epochs (A.4: one; None: the provider's "auto"), the other
    hyperparameters left to the provider's defaults. Returns the file and job ids and the
    hyperparameters sent; poll with ``finetune_status``."""
    if n_epochs is not None and n_epochs < 1:
        raise ConfigError(f"n_epochs must be at least 1, got {n_epochs}")
    report = validate_sft_file(path)
    if not report.valid:
        raise ConfigError(
            f"{path} is not a valid fine-tuning file: {'; '.join(report.problems[:3])}",
            hint="re-export it with cocoeval sft-export",
        )
    client = _client(base_url, max_retries)
    with _mapped_errors(model), open(path, "rb") as fh:
        f = client.files.create(file=fh, purpose="fine-tune")
    hyper = {} if n_epochs is None else {"n_epochs": n_epochs}
    kw: dict[str, Any] = {
        "training_file": f.id,
        "model": model,
        "method": {"type": "supervised", "supervised": {"hyperparameters": hyper}},
    }
    if suffix:
        kw["suffix"] = suffix
    if seed is not None:
        kw["seed"] = seed
    with _mapped_errors(model):
        job = client.fine_tuning.jobs.create(**kw)
    return {"file_id": f.id, "job_id": job.id, "status": job.status, "model": model, "hyperparameters": hyper}


def _client(base_url: str | None, max_retries: int = 5) -> Any:
    """An OpenAI client whose key goes only where the provider rule allows (OPENAI_API_KEY to
    OpenAI's own hosts; any other ``base_url`` is refused, see ``secrets.key_env_for``)."""
    import openai

    from cocoeval.llm.secrets import key_env_for

    env = key_env_for(
        f"openai/fine-tuning{'@' + base_url if base_url else ''}",
        default_env="OPENAI_API_KEY",
        base_url=base_url,
        hosts=("api.openai.com",),
        key_env=None,
    )
    if not os.environ.get(env):
        raise ConfigError(f"fine-tuning needs {env}", hint=f"export {env}=...")
    return openai.OpenAI(api_key=os.environ[env], base_url=base_url, max_retries=max_retries)


@contextlib.contextmanager
def _mapped_errors(model: str) -> Iterator[None]:
    """The SDK's errors as the LLM layer maps them (a bad key or unknown model is a clear,
    redacted FatalLLMError; a transient one a CallError), never a bare traceback."""
    import openai

    from cocoeval.llm import classify_error

    try:
        yield
    except openai.APIError as e:
        status = getattr(e, "status_code", None)
        err = classify_error(
            status,
            getattr(e, "body", None),
            str(e),
            type(e).__name__,
            provider="openai",
            model=model,
            key_env="OPENAI_API_KEY",
        )
        if isinstance(err, CocoevalError):
            raise err from None
        raise ConfigError(
            f"fine-tuning request failed: {err}", hint="check the file and model, then run the command again"
        ) from None


def finetune_status(job_id: str, *, base_url: str | None = None) -> dict[str, Any]:
    """The job's status and, once it succeeded, the simulator spec to use."""
    with _mapped_errors(job_id):
        job = _client(base_url).fine_tuning.jobs.retrieve(job_id)
    out = {"job_id": job.id, "status": job.status, "fine_tuned_model": job.fine_tuned_model}
    if job.fine_tuned_model:
        out["simulator_spec"] = f"openai/{job.fine_tuned_model}"
    if getattr(job, "error", None) and getattr(job.error, "message", None):
        out["error"] = job.error.message
    return out
