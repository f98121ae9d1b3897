"""The stage runner: a loaded params file (``Experiment``) runs its stages (build, simulate, judge)
into the run directory. ``manifest.json`` is rewritten at the start (status running) and the end
(status complete, summary); ``continuations/<setup>.jsonl`` and ``judgments/<judge>.jsonl`` are
rewritten atomically after every round, and ``usage.json`` at the end. Every LLM call goes through
the call cache, so re-running a finished run sends no request and a killed run resumes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cocoeval import __version__
from cocoeval.bench.build import ContextPlan
from cocoeval.bench.step import plan_build, run_build
from cocoeval.bench.store import has_benchmark, load_instances, split_file
from cocoeval.core.errors import CocoevalError, ConfigError, InputError, Interrupted
from cocoeval.core.files import portable_path, portable_record
from cocoeval.core.jsonio import write_jsonl
from cocoeval.core.names import child_path
from cocoeval.core.schema import Continuation, Instance, Judgment
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.judge.config import PROMPTS as JUDGE_PROMPTS
from cocoeval.judge.config import judge_ids
from cocoeval.judge.engine import judge
from cocoeval.judge.ensemble import combine
from cocoeval.llm import LLMConfig, Runner, parse_model_spec
from cocoeval.llm.errors import CostCapReached
from cocoeval.prompts.files import load_prompt
from cocoeval.simulate.engine import simulate
from cocoeval.simulate.exchange import import_continuations
from cocoeval.simulate.plugins import new_plugin
from cocoeval.simulate.setup import ImportedSetup, PluginSetup

from .compose import ParamsSource
from .humans import check_judge_names
from .lock import run_dir_lock
from .outcome import tally
from .params import ExperimentParams, read_params_file
from .rundir import (
    RUN_FORMAT,
    USAGE_JOURNAL,
    Manifest,
    checked_turns,
    git_revision,
    now,
    read_continuations,
    spent_outside_journal,
    write_manifest,
    write_usage,
)
from .stopping import StoppingRecord, bounds_of, decide, observations, record_for, rounds_of, setup_stop


class Experiment:
    """A loaded params file with its paths resolved: relative paths are read from ``base``, the
    folder of the file named (those of the files it extends are rewritten to it when read:
    ``cocoeval.run.compose``). ``files`` and ``sets``, the files read and the ``--set`` overrides,
    go into the run's manifest."""

    def __init__(
        self,
        params: ExperimentParams,
        base: Path,
        source: str | None = None,
        *,
        files: tuple[ParamsSource, ...] = (),
        sets: tuple[str, ...] = (),
    ) -> None:
        self.base = base
        self.source = source
        self.files = files
        self.sets = sets
        # an imported setup's file is read from the params file's folder
        self.params = params.model_copy(
            update={
                "setups": [
                    s.model_copy(update={"continuations": str(self.resolve(s.continuations))})
                    if isinstance(s, ImportedSetup)
                    else s
                    for s in params.setups
                ]
            }
        )
        self.run_dir = self.resolve(params.out) if params.out else base.parent / "runs" / params.name
        self.taxonomy = load_taxonomy(self.resolve(params.taxonomy) if params.taxonomy else None)

    def resolve(self, p: str) -> Path:
        q = Path(p).expanduser()
        return q if q.is_absolute() else (self.base / q).resolve()

    def llm_config(self, *, progress: bool | None = None) -> LLMConfig:
        """The params' ``llm:`` settings with their paths resolved; ``progress`` overrides its own
        (settings given for one invocation are ``--set llm.KEY=VALUE`` overrides of the params)."""
        cfg = self.params.llm
        upd: dict[str, Any] = {}
        if cfg.cache:
            upd["cache"] = str(self.resolve(cfg.cache))
        if cfg.prices:
            upd["prices"] = str(self.resolve(cfg.prices))
        if progress is not None:
            upd["progress"] = progress
        return cfg.model_copy(update=upd)

    # ------------------------------------------------------------------ stages
    def output_paths(self) -> tuple[dict[str, Path], dict[str, Path]]:
        """{setup: its continuations file}, {judge: its judgments file}. Refuses (ConfigError)
        a name that is no safe file name, leaves the run directory or repeats (ignoring case),
        also when the params were changed after loading (e.g. a setup appended in a notebook)."""
        out = []
        for key, kind, items in (
            ("continuations", "setup", self.params.setups),
            ("judgments", "judge", self.params.judges),
        ):
            paths = {x.name: child_path(self.run_dir / key, x.name, kind=kind, source=self.source) for x in items}
            if len({n.lower() for n in paths}) < len(items):
                raise ConfigError(
                    f"{self.source or 'params'}: {kind} names must be unique (ignoring case)",
                    hint=f"rename the repeated {kind}s",
                )
            out.append(paths)
        return out[0], out[1]

    def _continuations_to_judge(
        self, paths: dict[str, Path], insts: list[Instance], warn: Callable[[str], None]
    ) -> dict[str, list[Continuation]]:
        """Every continuation in the files of the params' setups (the ok ones are judged); says
        which setup has no file, which continuations another setup version made, which belong to
        instances this params file does not select (those are not judged)."""
        ids = {i.id for i in insts}
        refs = {i.id: len(i.reference) for i in insts}
        out: dict[str, list[Continuation]] = {}
        for s in self.params.setups:
            p, rel = paths[s.name], paths[s.name].relative_to(self.run_dir)
            if not p.exists():
                warn(
                    f"setup {s.name}: no {rel} in the run directory, so nothing of it was judged "
                    "(run the simulate stage)"
                )
                continue
            # a repeated instance is refused; one marked ok with a wrong number of turns is invalid
            conts = out[s.name] = [checked_turns(c, refs.get(c.instance_id)) for c in read_continuations(p)]
            sid = s.setup_id(self.taxonomy)
            if stale := sum(c.setup_id != sid for c in conts):
                warn(
                    f"setup {s.name}: {stale} continuation(s) in {rel} were simulated with other "
                    f"settings (setup id is now {sid}); judged under their own setup id; "
                    "run the simulate stage to replace them"
                )
            if outside := sum(c.instance_id not in ids for c in conts):
                warn(
                    f"setup {s.name}: {outside} continuation(s) in {rel} are of instances this params "
                    "file does not select; not judged"
                )
        return out

    def _stored_plugin_continuations(
        self, paths: dict[str, Path], warn: Callable[[str], None]
    ) -> dict[str, list[Continuation]]:
        """{plugin setup: the continuations its file holds from an earlier run}, which the simulate
        stage keeps when finished (``simulate.engine.reusable``); a file that cannot be read is said
        and simulated again."""
        out: dict[str, list[Continuation]] = {}
        for s in self.params.setups:
            if not isinstance(s, PluginSetup):
                continue
            for p in (paths[s.name], self._unused_path(paths[s.name])):
                if not p.exists():
                    continue
                try:
                    got = read_continuations(p)
                except CocoevalError as e:
                    warn(f"setup {s.name}: {e}; its continuations are simulated again")
                    continue
                have = {c.instance_id for c in out.get(s.name, [])}
                out.setdefault(s.name, []).extend(c for c in got if c.instance_id not in have)
        return out

    def _unused_path(self, path: Path) -> Path:
        """Where a run with ``stopping:`` keeps a plugin setup's stored continuations of instances it
        has not processed (again): out of ``continuations/`` (the report reads every file there), so
        that a rule that stops earlier than last time never erases what a plugin was paid for."""
        return self.run_dir / "cache" / "unused-continuations" / path.name

    def _keep_unused(self, path: Path, stored: list[Continuation], done: set[str]) -> None:
        unused = [c for c in stored if c.instance_id not in done]
        side = self._unused_path(path)
        if unused:
            side.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(side, unused)
        else:
            side.unlink(missing_ok=True)

    def _orphans(self, paths: dict[str, Path]) -> list[str]:
        """Continuation files in the run directory that no setup of the params names (an earlier
        params version, a renamed setup): not judged, and said so."""
        cdir = self.run_dir / "continuations"
        known = {p.resolve() for p in paths.values()}
        found = sorted(p for p in cdir.rglob("*.jsonl") if p.resolve() not in known) if cdir.is_dir() else []
        return [
            f"{p.relative_to(self.run_dir)}: continuations of no setup in {self.source or 'the params'} "
            "(an earlier params version or a renamed setup?); not judged. Add the setup back to judge "
            "them, or move the file out of the run directory (reports read every file there)"
            for p in found
        ]

    def bench_dir(self) -> Path:
        if self.params.bench:
            return self.resolve(self.params.bench)
        return self.run_dir / "bench"

    def prepare_instances(self, write: bool = True, runner: Runner | None = None) -> list[Instance]:
        """The selected instances (building the benchmark first when the params say so; LLM-made
        context through ``runner``, or a Runner of the params' llm: settings); ``write`` also
        saves them as the run's instances.jsonl."""
        b = self.params.build
        bench = self.bench_dir()
        if b is not None and (write or not has_benchmark(bench)):
            bench = run_build(
                b,
                [self._resolve_source(s) if ":" in s else s for s in b.sources],
                bench,
                write=write,
                runner=runner,
                make_runner=lambda: Runner(self.llm_config()),
                demo_dir=self.run_dir / "demo-data",
            )
        sel = self.params.instances
        insts = load_instances(bench, sel.split)
        if not insts:  # before the selection: the split itself is empty
            raise InputError(
                f"holds no instance of the {sel.split} split (an empty file)",
                file=str(split_file(bench, sel.split)),
                hint="build the benchmark again (cocoeval build), or choose the other split in instances:",
            )
        if sel.datasets is not None:
            insts = [i for i in insts if i.dataset in sel.datasets]
        if sel.ids is not None:
            wanted = set(sel.ids)
            insts = [i for i in insts if i.id in wanted]
        if sel.per_dataset is not None:
            seen: Counter[str] = Counter()
            kept = []
            for i in sorted(insts, key=lambda i: i.id):
                if seen[i.dataset] < sel.per_dataset:
                    kept.append(i)
                    seen[i.dataset] += 1
            insts = kept
        if not insts:
            raise ConfigError(
                f"no instances selected from {bench}",
                hint="check instances: (split, datasets, ids) against the benchmark's report.json",
            )
        if write:
            write_jsonl(self.run_dir / "instances.jsonl", insts)
        return insts

    def build_plan(self) -> ContextPlan | None:
        """The benchmark-creation calls (clean-up, M, S) the ``build:`` section would send, by the
        build's own code, for ``cocoeval estimate`` (None: no LLM-made context asked for); kinds
        the run's benchmark folder already holds are in its ``cached``, not planned."""
        b = self.params.build
        if b is None:
            return None
        return plan_build(
            b,
            [self._resolve_source(s) if ":" in s else s for s in b.sources],
            self.bench_dir(),
            demo_dir=self.run_dir / "demo-data",
        )

    def build_models(self) -> set[str]:
        """The models the build: section calls (clean-up, M, S)."""
        return self.params.build.models() if self.params.build else set()

    def missing_sources(self) -> list[tuple[str, Path]]:
        """(spec, path) of each build: source whose path does not exist."""
        b = self.params.build
        out = []
        for spec in b.sources if b else []:
            path = Path(self._resolve_source(spec).partition(":")[2].partition("#")[0])
            if not path.exists():
                out.append((spec, path))
        return out

    def _resolve_source(self, spec: str) -> str:
        kind, _, rest = spec.partition(":")
        path, sep, ds = rest.partition("#")
        return f"{kind}:{self.resolve(path)}{sep}{ds}"

    def _params_folder(self) -> Path:
        """What a recorded absolute path of the params is made relative to: the params file's folder,
        against which its relative paths are read (the working folder for params given in code)."""
        return Path.cwd() if self.source is None else Path(self.source).parent

    def manifest(self, **extra: Any) -> Manifest:
        prompts = {p for s in self.params.setups for p in s.prompt_names()}
        prompts |= {JUDGE_PROMPTS[k] for j in self.params.llm_judges for k in j.kind}
        return Manifest.model_validate(
            {
                "format": RUN_FORMAT,
                "cocoeval_version": __version__,
                "git_revision": git_revision(),
                "params_file": None if self.source is None else portable_path(self.source, Path.cwd()),
                "params": portable_record(self.params.model_dump(mode="json"), self._params_folder()),
                "params_files": [{"path": portable_path(f.path, Path.cwd()), "sha256": f.sha256} for f in self.files],
                "params_set": list(self.sets),
                "taxonomy": {"name": self.taxonomy.name, "hash": self.taxonomy.hash},
                "prompts": {p: load_prompt(p).ref for p in sorted(prompts)},
                "setups": {s.name: s.setup_id(self.taxonomy) for s in self.params.setups},
                "imported": {
                    s.name: {
                        "file": portable_path(s.continuations, Path.cwd()),
                        "sha256": s.file_sha256(),
                        "description": s.description,
                        **({"model": portable_record(s.model, Path.cwd())} if s.model else {}),
                    }
                    for s in self.params.setups
                    if isinstance(s, ImportedSetup)
                },
                "judges": judge_ids(self.params.judges, self.taxonomy),  # ensembles' from their members' ids
                **extra,
            }
        )

    def run(self, stages: tuple[str, ...] = ("simulate", "judge"), progress: bool | None = None) -> Path:
        """Run the stages; returns the run directory. The manifest's ``summary``
        counts per stage what ended ok / invalid / failed (``outcome.tally``) and lists warnings.
        One run at a time on a run directory: a second one is refused (RunDirLockedError names
        the holder)."""
        self.output_paths()  # refuses unsafe names before anything is written
        if self.params.stopping is not None and set(stages) != {"simulate", "judge"}:
            raise ConfigError(
                f"{self.source or 'params'}: stopping: runs the simulate and judge stages together, round by round "
                f"(asked for: {', '.join(stages)})",
                hint="run both stages (leave --stage out), or leave stopping: out of the params",
            )
        models = sorted(
            {m for s in self.params.setups for m in s.model_specs().values()}
            | {j.model for j in self.params.llm_judges}
            | self.build_models()
        )
        for m in models:
            parse_model_spec(m)  # so is a model spec with a key in its URL (it would be in every file)
        self._check_cap_prices(models)
        check_judge_names(self.run_dir, [j.name for j in self.params.judges])
        for s in self.params.setups:  # a plugin that cannot be made is refused before the manifest says "running"
            if isinstance(s, PluginSetup):
                new_plugin(s, self.taxonomy)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with run_dir_lock(self.run_dir):
            return self._run(stages, progress)

    def _check_cap_prices(self, models: list[str]) -> None:
        """Under a cost cap (``llm.max_usd``, ``--max-usd``) every model the run calls has a known price
        (``llm.price`` or the table): refused before the manifest says "running" and anything is sent."""
        cap = self.params.llm.max_usd
        if cap is None:
            return
        table = self.llm_config().price_table()
        unknown = [m for m in models if table.price_for(m) is None]
        if unknown:
            raise ConfigError(
                f"{self.source or 'params'}: a cost cap (--max-usd / llm.max_usd ${cap:g}) is set and the price of "
                f"{', '.join(unknown)} is unknown (not in the price table): its spend could not be counted against "
                "the cap; nothing was sent",
                hint="give its price, USD per 1M tokens, in the llm: section: price: {MODEL_SPEC: {input: X, "
                "cached_input: Y, output: Z}} (docs/cost.md), or leave the cap out",
            )

    def _run(self, stages: tuple[str, ...], progress: bool | None) -> Path:
        cpaths, jpaths = self.output_paths()
        started = now()
        cfg = self.llm_config(progress=progress)
        mode = {"batch": cfg.batch, "batch_dependent": cfg.batch_dependent, "processes": cfg.processes}
        write_manifest(self.run_dir, self.manifest(status="running", started=started, llm_mode=mode))
        runner = Runner(  # what it pays is known even if it is killed; a cost cap counts what earlier runs paid
            cfg, journal=self.run_dir / USAGE_JOURNAL, earlier=spent_outside_journal(self.run_dir)
        )
        try:
            return self._stages(stages, runner, cpaths, jpaths, started, mode)
        except CostCapReached as e:  # no further request sent: what finished is kept; resumable with a larger cap
            write_manifest(
                self.run_dir,
                self.manifest(
                    status="stopped",
                    started=started,
                    stopped=now(),
                    stopped_reason=e.reason,
                    cost_cap={"max_usd": e.max_usd, "spent_usd": round(e.spent_usd, 6), "not_sent": e.not_sent},
                    llm_mode=mode,
                    stages=list(stages),
                ),
            )
            raise
        except KeyboardInterrupt:  # Ctrl-C: what finished is kept; the manifest says so, not "complete"
            write_manifest(
                self.run_dir,
                self.manifest(
                    status="interrupted", started=started, interrupted=now(), llm_mode=mode, stages=list(stages)
                ),
            )
            raise Interrupted(self._kept(runner, cpaths, jpaths)) from None

    def _kept(self, runner: Runner, cpaths: dict[str, Path], jpaths: dict[str, Path]) -> str:
        """What an interrupted run kept, in one line, and how to go on."""
        tot = runner.ledger.totals()
        answered = tot.get("calls", 0) - tot.get("cache_hits", 0) - tot.get("failed", 0)
        files = [str(p.relative_to(self.run_dir)) for p in (*cpaths.values(), *jpaths.values()) if p.exists()]
        return (
            f"{answered} call(s) answered in this invocation are kept in the call cache, the run directory "
            f"{self.run_dir} keeps what finished ({', '.join(files) or 'no continuation or judgment yet'}); "
            f"the run can be resumed with the same command (cocoeval run {self.source or 'PARAMS'}): no "
            "completed call is sent again"
        )

    def _stages(
        self,
        stages: tuple[str, ...],
        runner: Runner,
        cpaths: dict[str, Path],
        jpaths: dict[str, Path],
        started: str,
        mode: dict[str, Any],
    ) -> Path:
        """The stages of ``_run`` through ``runner``: the manifest "complete" at their end."""
        summary: dict[str, Any] = {}
        warnings: list[str] = []

        def warn(msg: str) -> None:  # on stderr as it happens (cocoeval run), and in the summary
            warnings.append(msg)
            logging.getLogger("cocoeval").warning("warning: %s", msg)

        stop: StoppingRecord | None = None
        try:
            insts = self.prepare_instances(runner=runner)  # an LLM-made build's calls count in usage.json
            if self.params.stopping is not None and self.params.setups:
                stop = self._rounds(insts, runner, cpaths, jpaths, summary, warn, started, mode)
            elif "simulate" in stages and self.params.setups:

                def save(_round: int, partial: dict[str, list[Continuation]]) -> None:
                    for name, conts in partial.items():
                        _save(cpaths[name], conts, final=_round < 0)

                result = simulate(
                    insts,
                    self.params.setups,
                    runner,
                    taxonomy=self.taxonomy,
                    on_round=save,
                    warn=warn,
                    stored=self._stored_plugin_continuations(cpaths, warn),
                )
                save(-1, result)
                for s in self.params.setups:  # every selected instance simulated: nothing is left unused
                    if isinstance(s, PluginSetup):
                        self._unused_path(cpaths[s.name]).unlink(missing_ok=True)
                summary["simulate"] = {name: tally(cs).to_json() for name, cs in result.items()}
            if stop is None and "judge" in stages and self.params.judges:
                conts = self._continuations_to_judge(cpaths, insts, warn)
                if "simulate" not in summary and conts:
                    summary["simulate"] = {name: tally(cs).to_json() for name, cs in conts.items()}
                    summary["simulate_from_files"] = True

                def save_j(_round: int, partial: dict[str, list[Judgment]]) -> None:
                    for name, js in partial.items():
                        _save(jpaths[name], js, final=_round < 0)

                jres = judge(insts, conts, self.params.llm_judges, runner, taxonomy=self.taxonomy, on_round=save_j)
                ids = judge_ids(self.params.judges, self.taxonomy)
                for ens in self.params.ensembles:  # no call: combined from the members just judged
                    jres[ens.name] = combine(
                        ens, {m: jres.get(m, []) for m in ens.ensemble}, ids[ens.name], self.taxonomy, insts
                    )
                save_j(-1, jres)
                summary["judge"] = {name: tally(js).to_json() for name, js in jres.items()}
            for msg in self._orphans(cpaths):
                warn(msg)
            summary["warnings"] = warnings
        finally:
            write_usage(self.run_dir, runner)
            runner.close()
        write_manifest(
            self.run_dir,
            self.manifest(
                status="complete",
                started=started,
                finished=now(),
                llm_mode=mode,
                instances=len(insts),
                stages=list(stages),
                summary=summary,
                **({"stopping": stop} if stop is not None else {}),
            ),
        )
        return self.run_dir

    def _rounds(
        self,
        insts: list[Instance],
        runner: Runner,
        cpaths: dict[str, Path],
        jpaths: dict[str, Path],
        summary: dict[str, Any],
        warn: Callable[[str], None],
        started: str,
        mode: dict[str, Any],
    ) -> StoppingRecord:
        """Both stages in rounds of source conversations (the ``stopping:`` section, beyond the
        paper; ``cocoeval.run.stopping``): each round simulates its instances for the setups still
        running, judges them and the human reference, then evaluates the rule per setup; a settled
        setup takes no part in later rounds. The files and the manifest (its ``stopping`` record)
        are rewritten after every round; every call goes through the cache, so a killed run, or a
        later run with a larger budget or another rule, goes on without paying a call twice."""
        sec = self.params.stopping
        assert sec is not None
        tax = self.taxonomy
        judge_name = sec.judge or next(j.name for j in self.params.llm_judges if "fine_grained" in j.kind)
        rec = record_for(sec, judge_name, insts)
        rounds = rounds_of(insts, sec)
        setups = self.params.setups
        chosen = {s.name: {i.id for i in s.select(insts)} for s in setups}
        imported = {
            s.name: import_continuations(s, s.setup_id(tax), insts, warn)
            for s in setups
            if isinstance(s, ImportedSetup)
        }
        stored = self._stored_plugin_continuations(cpaths, warn)
        conts: dict[str, list[Continuation]] = {s.name: [] for s in setups}
        judged: dict[str, list[Judgment]] = {j.name: [] for j in self.params.llm_judges}
        done: dict[str, list[Instance]] = {s.name: [] for s in setups}
        processed: list[Instance] = []
        ids = judge_ids(self.params.judges, tax)
        active = [s.name for s in setups]
        for rnd, batch in enumerate(rounds, start=1):
            if not active:
                break
            running = [s for s in setups if s.name in active]
            batch_ids = {i.id for i in batch}
            before = {n: list(conts[n]) for n in active}

            def save(_round: int, partial: dict[str, list[Continuation]], before: Any = before) -> None:
                for name, cs in partial.items():
                    _save(cpaths[name], [*before[name], *cs], final=False)

            sim = [s for s in running if not isinstance(s, ImportedSetup)]
            new = simulate(batch, sim, runner, taxonomy=tax, on_round=save, warn=warn, stored=stored) if sim else {}
            fresh = {
                s.name: new[s.name] if s.name in new else [c for c in imported[s.name] if c.instance_id in batch_ids]
                for s in running
            }
            for s in running:
                conts[s.name] += fresh[s.name]
                done[s.name] += [i for i in batch if i.id in chosen[s.name]]
                _save(cpaths[s.name], conts[s.name], final=True)
                if s.name in stored:
                    self._keep_unused(cpaths[s.name], stored[s.name], {i.id for i in done[s.name]})
            processed += batch
            before_j = {n: list(js) for n, js in judged.items()}

            def save_j(_round: int, partial: dict[str, list[Judgment]], before_j: Any = before_j) -> None:
                for name, js in partial.items():
                    _save(jpaths[name], [*before_j[name], *js], final=False)

            jres = judge(batch, fresh, self.params.llm_judges, runner, taxonomy=tax, on_round=save_j)
            for name, js in jres.items():
                judged[name] += js
            out: dict[str, list[Judgment]] = dict(judged)
            for ens in self.params.ensembles:  # no call: combined from the members judged so far
                out[ens.name] = combine(
                    ens, {m: judged.get(m, []) for m in ens.ensemble}, ids[ens.name], tax, processed
                )
            for name, js in out.items():
                _save(jpaths[name], js, final=True)
            for name in list(active):
                obs = observations(done[name], name, judged.get(judge_name, []), judge_name, tax)
                bounds = bounds_of(obs, tax.ids, sec.alpha, rec.conversations_planned)
                verdict, why = decide(bounds, sec)
                status: Any = "running"
                if verdict is not None and rnd >= sec.min_rounds:
                    status, why = verdict, f"stopped after round {rnd} of {len(rounds)}: {why}"
                    active.remove(name)
                elif rnd == len(rounds):
                    status, why = (
                        "budget",
                        f"every round done ({rnd}), not settled: {why.removeprefix('not settled: ')}",
                    )
                elif verdict is not None:
                    why = f"{why}; not stopped before round {sec.min_rounds} (min_rounds)"
                prefix = min(rnd * sec.round_conversations, rec.conversations_planned)
                rec.setups[name] = setup_stop(status, rnd, done[name], obs, bounds, why, prefix)
            summary["simulate"] = {name: tally(cs).to_json() for name, cs in conts.items()}
            summary["judge"] = {name: tally(js).to_json() for name, js in out.items()}
            write_manifest(
                self.run_dir,
                self.manifest(status="running", started=started, llm_mode=mode, stopping=rec),
            )
        return rec


def _save(path: Path, items: list[Continuation] | list[Judgment], final: bool) -> None:
    """Write a stage's file: after a round its finished items, once there are any (until then an
    earlier file stays: a killed run never leaves an empty, unreadable file); at the end all of
    them, and no file when there are none (an empty JSONL file is no run file)."""
    if items:
        write_jsonl(path, items)
    elif final:
        path.unlink(missing_ok=True)


def load_params(path: str | Path, sets: tuple[str, ...] | list[str] = ()) -> Experiment:
    """Read and validate a params file, the files it extends merged under it and ``sets`` (``--set
    KEY=VALUE`` overrides) on top (``cocoeval.run.compose``); errors name the file or the flag,
    the key and the fix."""
    pf = read_params_file(path, sets)
    return Experiment(pf.params, Path(path).resolve().parent, str(path), files=pf.files, sets=pf.sets)
