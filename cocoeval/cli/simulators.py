"""The ``cocoeval`` commands for simulators written elsewhere: export-instances, import-continuations,
simulators (docs/simulators.md)."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ._args import out_file


def _instances(source: Path, split: str, setup: str | None) -> tuple[list[Any], str]:
    """The instances of a run directory, a benchmark folder or a params file (its run's
    selection), and what they are, for the message."""
    from cocoeval.bench.store import load_instances, split_file
    from cocoeval.core.errors import ConfigError, InputError
    from cocoeval.core.jsonio import read_models
    from cocoeval.core.schema import Instance

    if source.suffix in (".yaml", ".yml"):
        from cocoeval.run.stages import load_params

        exp = load_params(source)
        insts = exp.prepare_instances(write=False)
        if setup is not None:
            chosen = [s for s in exp.params.setups if s.name == setup]
            if not chosen:
                raise ConfigError(
                    f"{source} has no setup {setup!r}",
                    hint="its setups: " + (", ".join(s.name for s in exp.params.setups) or "(none)"),
                )
            insts = chosen[0].select(insts)
        return insts, f"the instances {source} selects" + (f" for setup {setup}" if setup else "")
    if setup is not None:
        raise ConfigError("--setup needs a params file (its setups choose instances)", hint="give PARAMS.yaml")
    if (source / "instances.jsonl").is_file():
        return read_models(source / "instances.jsonl", Instance), f"the instances of run {source}"
    if split_file(source, split).is_file():  # built (JSONL) or exported (parquet, cocoeval bench-export)
        return load_instances(source, split), f"the {split} split of benchmark {source}"
    raise InputError(
        "neither a run directory (instances.jsonl) nor a benchmark folder "
        f"({split}.jsonl or {split}.parquet) nor a params file",
        file=str(source),
        hint="give a run directory, a folder written by cocoeval build or bench-export, or PARAMS.yaml",
    )


def _cmd_export_instances(a: argparse.Namespace) -> int:
    from cocoeval.simulate.exchange import export_instances

    insts, what = _instances(a.path, a.split, a.setup)
    n = export_instances(insts, a.out)
    print(
        f"wrote {n} instance(s), {what}, to {a.out}: write each one's n_turns turns and import them "
        "(docs/simulators.md)"
    )
    return 0


def _cmd_import_continuations(a: argparse.Namespace) -> int:
    from cocoeval.core.errors import ConfigError
    from cocoeval.run.outcome import reason_group
    from cocoeval.run.params import add_setup
    from cocoeval.run.stages import load_params
    from cocoeval.simulate.exchange import import_continuations
    from cocoeval.simulate.setup import ImportedSetup

    exp = load_params(a.params)
    # its folders resolved as the params' paths are, not the file itself: a link is named as given
    file = Path(os.path.abspath(a.file)).parent.resolve() / a.file.name
    have = [s for s in exp.params.setups if s.name.lower() == a.setup.lower()]
    if have and not (isinstance(have[0], ImportedSetup) and Path(have[0].continuations) == file):
        raise ConfigError(
            f"{a.params} already has a setup {have[0].name!r}"
            + (f" importing {have[0].continuations}" if isinstance(have[0], ImportedSetup) else ""),
            hint="choose another --setup name, or edit that setup",
        )
    entry: dict[str, Any] = {"name": a.setup, "continuations": str(file)}  # add_setup writes it relative
    if a.description:
        entry["description"] = a.description
    if a.model:
        entry["model"] = a.model
    setup = ImportedSetup.model_validate(entry)
    insts = exp.prepare_instances(write=False)
    warnings: list[str] = []
    conts = import_continuations(setup, setup.setup_id(exp.taxonomy), insts, warnings.append)
    models = sorted({m for c in conts if (m := (c.imported or {}).get("model")) and isinstance(m, str)})
    if not a.model and len(models) == 1:  # the records' own label, where they agree on one
        entry["model"] = models[0]
    elif a.model and models and models != [a.model]:
        warnings.append(f"--model {a.model} is written to the setup; the records name {', '.join(models[:5])}")
    elif len(models) > 1:
        warnings.append(
            f"the records name {len(models)} models ({', '.join(models[:5])}); give --model to label the setup"
        )
    bad = Counter(
        why
        for c in conts
        if c.status != "ok"  # each problem of a record, without its details
        for why in reason_group(c.reason or "no reason").removeprefix("imported continuation: ").split("; ")
    )
    print(
        f"{a.file}: {len(conts)} continuation(s) of {len(setup.select(insts))} selected instance(s); "
        f"{sum(c.status == 'ok' for c in conts)} valid, {sum(c.status != 'ok' for c in conts)} invalid"
        + (f", written by {entry['model']}" if entry.get("model") else "")
    )
    for why, n in bad.most_common():
        print(f"  invalid ({n}): {why}")
    if unknown := sorted({u for c in conts for u in c.unknown_speakers}):
        print(
            f"  speakers not among the participants (kept, noted): {', '.join(unknown[:10])}"
            + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        )
    for w in warnings:
        print(f"  warning: {w}")
    if a.check:
        print("checked only (--check): the params file is unchanged")
        return 0
    if not have:
        add_setup(a.params, entry)
        print(f"added setup {a.setup} to {a.params}")
    print(f"next: cocoeval run {a.params}  (imports it and judges it; calls already made are answered from the cache)")
    return 0


def _cmd_simulators(a: argparse.Namespace) -> int:
    from cocoeval.simulate.plugins import check_simulators

    listed = check_simulators()
    for name, cls, why in listed:
        if cls is None:
            print(f"{name}  CANNOT BE USED: {why}")
            continue
        doc = cls.__doc__ if isinstance(cls.__doc__, str) else ""
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        print(f"{name}  (version {cls.version}, {cls.__module__}.{cls.__qualname__}): {first}")
    if broken := sum(cls is None for _, cls, _ in listed):
        print(
            f"{broken} of {len(listed)} simulator(s) cannot be used (a setup naming one is refused); "
            "fix or uninstall the package that offers it"
        )
    return 0


def add_commands(sub: Any) -> None:
    ex = sub.add_parser(
        "export-instances",
        help="write what a simulator needs per instance (JSONL) to simulate elsewhere",
        description="Write one JSON object per instance: id, dataset, kind, M (goals, participants with roles), "
        "S, x and the number of turns to write (not the human reference). Schema: "
        "cocoeval/simulate/schemas/simulator_input.schema.json; docs/simulators.md.",
    )
    ex.add_argument(
        "path",
        type=Path,
        help="a run directory, a benchmark folder (cocoeval build) or a params file (the instances its run selects)",
    )
    ex.add_argument("--out", type=out_file, required=True, help="the JSONL file to write")
    ex.add_argument(
        "--split", choices=("eval", "train"), default="eval", help="a benchmark folder's split (default eval)"
    )
    ex.add_argument("--setup", help="with a params file: only the instances this setup selects")
    ex.set_defaults(func=_cmd_export_instances)

    im = sub.add_parser(
        "import-continuations",
        help="add continuations written elsewhere to a params file as a setup",
        description="Check FILE (one record per instance: instance_id, turns as speaker + text, optional model, "
        "notes, usage) against the instances PARAMS selects, print what is valid and what is invalid and why, "
        "and add {name, continuations, description} to the params file's setups: (its comments are kept). "
        "Then cocoeval run PARAMS imports and judges it. Unreadable records, unknown instance ids and an instance "
        "given twice are errors (nothing is added); too few or too many turns and turns without speaker or "
        "text are kept and counted invalid with the reason.",
    )
    im.add_argument(
        "file", type=Path, help="the continuations JSONL (schema: cocoeval/simulate/schemas/continuation.schema.json)"
    )
    im.add_argument("params", type=Path, help="the params file to add the setup to")
    im.add_argument("--setup", required=True, help="the setup's name (a safe file name)")
    im.add_argument("--description", help="what made them (shown in the report)")
    im.add_argument(
        "--model",
        help="the model or system that wrote them (for tables; never called); default: the records' model when "
        "they all name the same one",
    )
    im.add_argument("--check", action="store_true", help="check and report only; leave the params file as it is")
    im.set_defaults(func=_cmd_import_continuations)

    sm = sub.add_parser("simulators", help="list the simulator plugins (built in and installed)")
    sm.set_defaults(func=_cmd_simulators)
