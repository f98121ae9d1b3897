"""Supervised fine-tuning data: the train split as OpenAI fine-tuning chat JSONL.

One file per k (turns per call). Each example is one simulation step with the same prompt the
simulator gets: for k < the reference length a random starting turn j per instance (seeded);
the gold turns before j stand as "turns written so far", and the assistant answer is the next k
human turns. A fine-tuned model id is then just another simulator model spec
(``openai/ft:gpt-4.1-...``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import CocoevalError, ConfigError
from .jsonio import iter_jsonl, write_jsonl
from .llm.usage import count_tokens, token_method
from .prompts import load_prompt
from .schema import Instance
from .simulate import format_behaviours, format_turns, step_messages
from .taxonomy import Taxonomy, load_taxonomy

ROLES = {"system", "user", "assistant"}
DEFAULT_MAX_EXAMPLE_TOKENS = 65_536
"""OpenAI's training context for gpt-4.1 fine-tuning; pass the limit of your base model."""


def sft_examples(instances: Sequence[Instance], k: int, *, prompt: str = "vanilla", seed: int = 0,
                 taxonomy: Taxonomy | None = None) -> list[dict[str, Any]]:
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


def validate_sft_file(path: str | Path, max_example_tokens: int = DEFAULT_MAX_EXAMPLE_TOKENS) -> dict[str, Any]:
    """Check a chat fine-tuning file: roles, shape, token counts per example. Returns a report
    with every problem found (file, line, what)."""
    problems: list[str] = []
    tokens: list[int] = []
    for n, obj in iter_jsonl(path):
        where = f"{path} line {n}"
        msgs = obj.get("messages") if isinstance(obj, dict) else None
        if not isinstance(msgs, list) or not msgs:
            problems.append(f"{where}: no 'messages' list")
            continue
        bad = [i for i, m in enumerate(msgs) if not isinstance(m, dict) or m.get("role") not in ROLES
               or not isinstance(m.get("content"), str) or not m["content"].strip()]
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
    return {"file": str(path), "examples": len(tokens), "tokens": sum(tokens),
            "max_example_tokens": max(tokens, default=0), "token_method": token_method(),
            "problems": problems, "valid": not problems and bool(tokens)}


def export_sft(instances: Sequence[Instance], out_dir: str | Path, *, ks: Sequence[int] = (1, 5, 30),
               prompt: str = "vanilla", seed: int = 0, taxonomy: Taxonomy | None = None,
               max_example_tokens: int = DEFAULT_MAX_EXAMPLE_TOKENS) -> dict[str, Any]:
    """Write ``sft_k{k}.jsonl`` for each k, validate them, and return the report."""
    out = Path(out_dir)
    files = {}
    for k in ks:
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        path = out / f"sft_k{k}.jsonl"
        write_jsonl(path, sft_examples(instances, k, prompt=prompt, seed=seed, taxonomy=taxonomy))
        files[str(k)] = validate_sft_file(path, max_example_tokens)
    report = {"instances": len(instances), "prompt": load_prompt(prompt).ref, "seed": seed, "files": files}
    (out / "sft_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def start_finetune(path: str | Path, model: str, *, suffix: str | None = None, seed: int | None = None,
                   base_url: str | None = None, max_retries: int = 5) -> dict[str, Any]:
    """Upload a training file and start an OpenAI fine-tuning job (key from OPENAI_API_KEY).
    Returns the file and job ids; poll with ``finetune_status``."""
    report = validate_sft_file(path)
    if not report["valid"]:
        raise ConfigError(f"{path} is not a valid fine-tuning file: {'; '.join(report['problems'][:3])}",
                          hint="re-export it with cocoeval sft-export")
    client = _client(base_url, max_retries)
    with _mapped_errors(model), open(path, "rb") as fh:
        f = client.files.create(file=fh, purpose="fine-tune")
    kw: dict[str, Any] = {"training_file": f.id, "model": model}
    if suffix:
        kw["suffix"] = suffix
    if seed is not None:
        kw["seed"] = seed
    with _mapped_errors(model):
        job = client.fine_tuning.jobs.create(**kw)
    return {"file_id": f.id, "job_id": job.id, "status": job.status, "model": model}


def _client(base_url: str | None, max_retries: int = 5) -> Any:
    """An OpenAI client whose key goes only where the provider rule allows (OPENAI_API_KEY to
    OpenAI's own hosts; any other ``base_url`` is refused, see ``secrets.key_env_for``)."""
    import openai

    from .llm.secrets import key_env_for

    env = key_env_for(f"openai/fine-tuning{'@' + base_url if base_url else ''}", default_env="OPENAI_API_KEY",
                      base_url=base_url, hosts=("api.openai.com",), key_env=None)
    if not os.environ.get(env):
        raise ConfigError(f"fine-tuning needs {env}", hint=f"export {env}=...")
    return openai.OpenAI(api_key=os.environ[env], base_url=base_url, max_retries=max_retries)


@contextlib.contextmanager
def _mapped_errors(model: str) -> Iterator[None]:
    """The SDK's errors as the LLM layer maps them (a bad key or unknown model is a clear,
    redacted FatalLLMError; a transient one a CallError), never a bare traceback."""
    import openai

    from .llm.providers._errors import classify_error

    try:
        yield
    except openai.APIError as e:
        status = getattr(e, "status_code", None)
        err = classify_error(status, getattr(e, "body", None), str(e), type(e).__name__, provider="openai",
                             model=model, key_env="OPENAI_API_KEY")
        if isinstance(err, CocoevalError):
            raise err from None
        raise ConfigError(f"fine-tuning request failed: {err}",
                          hint="check the file and model, then run the command again") from None


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
