"""A hostile campaign by class (issue #24): every input surface × a systematic set of mutation
operators, run through the real command line, each case classified.

    python benchmarks/hostile.py [--surface NAME ...] [--op NAME ...] [--report] [--jobs 2] [--timeout 30]

It builds a small offline run (three QMSum-shaped meetings cut into instances, one setup and one
judge of both kinds against the loopback fake provider server of ``tests/fakes/server``; no key,
no network), an annotation export of it with a filled template, and a standalone benchmark; then,
per case, copies that tree, applies one mutation to one file and runs the commands that read it
(``python -m cocoeval check / estimate / run / show / build / batches / annotate-export /
annotate-import`` and a probe that opens the run and counts its frames as ``cocoeval report``
does; ``--report`` runs ``cocoeval report`` too, 8 s a case) as subprocesses with a timeout.

Surfaces: params YAML; the benchmark's eval.jsonl; the run's instances.jsonl, continuations,
judgments, manifest.json, usage.json and usage journal; the annotation CSV and key.json; the call
cache; the source data folder. Operators: a required field deleted, a wrong type, a bool where an
int belongs, 10**20, a negative number, an empty string, NUL / control / bidi characters, a 2 MB
string, a key written twice, a record twice, a truncated file, binary garbage, an empty file,
invalid UTF-8, deeply nested JSON, a folder / FIFO / dangling symlink in place of the file, and
(when not root) an unreadable file; the cache gets row-level mutations (not JSON, an old format).

Each case is:
- ``clean``: every command exited 0 or 3 (a run with invalid entries) and the oracle holds, or
  exited 2 with a message naming the file;
- ``internal``: a command exited 1 or another unexpected status, or printed a traceback or
  "internal error";
- ``hang``: a command ran past the timeout;
- ``unclear``: exit 2 with a message that does not name the mutated file;
- ``silent``: a silent wrong: the oracle of the case found the bad data accepted and counted (a
  mutated continuation or judgment counted valid, an absurd params value passing ``check``, an
  annotation with a bad value imported, a negative or absurd count in ``all_invocations``, a bad
  journal line dropped without a warning, a dangling symlink in a source folder not reported);
- ``harness``: the mutation itself failed (a bug of this script, listed, never counted as a result).
A case is a hang after ``--timeout`` seconds (default 60: a 2 MB speaker name makes a run send
10 million prompt tokens, seconds on an idle machine, more under load).

Prints a table per surface × operator with the counts per class, then every case that is not
clean, with its command, exit status and the start of its output. ``tests/test_hostile_classes.py``
runs a fixed sample of these cases (``SAMPLE``) and asserts that none is internal, a hang or silent.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PY = sys.executable
SPEAKERS = ["Project Manager", "Marketing", "User Interface"]
WHOLE = "\n".join(f"{SPEAKERS[i % 3]}: point number {i}" for i in range(30))
FINE = json.dumps({"turns": [{"turn": i, "behaviours": []} for i in range(1, 31)]})
OVERALL = json.dumps({"consistency": 7, "collaborativeness": 5, "rationale": "fine"})
RUN = "runs/exp"
N_CONT, N_JUDG = 3, 12
"""What the base run holds: 3 ok continuations, 12 ok judgments (3 instances × 2 targets × 2 kinds)."""
LONG = 2_100_000
DEEP = 20_000
HUGE = 10**20
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# ----------------------------------------------------------------------------- the base tree
def meeting(n: int) -> dict[str, Any]:
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {"speaker": SPEAKERS[i % 3], "content": f"Turn number {i} about the budget ."} for i in range(n)
        ],
    }


def script(srv: Any) -> None:
    srv.reset()
    srv.configure(
        answers=[
            {"match": "Continuation to annotate", "text": FINE},
            {"match": "Continuation to evaluate", "text": OVERALL},
            {"match": "", "text": WHOLE},
        ]
    )


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    e.update(COCOEVAL_ALLOW_KEY_TO_LOOPBACK="1", PYTHONPATH=str(ROOT), COCOEVAL_DEBUG="0")
    return e


def cocoeval(cwd: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "cocoeval", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        stdin=subprocess.DEVNULL,
    )


def make_base(root: Path, srv: Any) -> None:
    """The tree every case starts from (see the module's docstring)."""
    import yaml

    for i in range(4):
        p = root / "src" / "product" / f"M{i}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(meeting(80 + i)), encoding="utf-8")
    model = f"openai-compatible/fake@{srv.openai_base}"
    common = {
        "setups": [{"name": "s", "model": model, "turns_per_call": 30}],
        "judges": [{"name": "j", "model": model, "kind": ["overall", "fine_grained"]}],
        "llm": {"cache": "cache.sqlite", "concurrency": 4},
    }
    (root / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "exp",
                "out": RUN,
                "build": {"sources": ["qmsum:src"], "options": {"per_dataset": 4, "seed": 0}},
                **common,
            },
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    (root / "pb.yaml").write_text(
        yaml.safe_dump({"name": "b", "out": "runs/b", "bench": "bench", **common}, sort_keys=False), encoding="utf-8"
    )
    script(srv)
    for argv in (
        ("run", "p.yaml", "--no-progress"),
        ("build", "--source", "qmsum:src", "--out", "bench"),
        ("run", "pb.yaml", "--no-progress"),
        ("annotate-export", RUN, "--out", "ann", "--overall-conversations", "2", "--fine-conversations", "2"),
    ):
        out = cocoeval(root, *argv)
        if out.returncode != 0:
            raise SystemExit(f"the base run failed: cocoeval {' '.join(argv)}: {out.stdout}{out.stderr}")
    rows = list(csv.DictReader(io.StringIO((root / "ann" / "template.csv").read_text(encoding="utf-8"))))
    for r in rows:
        r["annotator"] = "ann1"
        if r["turn"]:
            r["behaviours"] = "none"
        else:
            r["consistency"], r["collaborativeness"] = "7", "5"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (root / "ann" / "filled.csv").write_text(buf.getvalue(), encoding="utf-8")
    out = cocoeval(root, "annotate-import", "ann/filled.csv", RUN, "--key", "ann/key.json", "--dry-run")
    if out.returncode != 0:
        raise SystemExit(f"the base annotations do not import: {out.stdout}{out.stderr}")
    assert len((root / RUN / "continuations" / "s.jsonl").read_text().splitlines()) == N_CONT
    assert len((root / RUN / "judgments" / "j.jsonl").read_text().splitlines()) == N_JUDG


@contextmanager
def base_tree(srv: Any | None = None) -> Iterator[tuple[Path, Any]]:
    """A temporary base tree and the fake server its params files point at."""
    from tests.fakes.server import FakeServer

    with tempfile.TemporaryDirectory(prefix="cocoeval-hostile-") as tmp:
        if srv is None:
            with FakeServer() as s:
                make_base(Path(tmp) / "base", s)
                yield Path(tmp), s
        else:
            make_base(Path(tmp) / "base", srv)
            yield Path(tmp), srv


# ----------------------------------------------------------------------------- mutations
def _path(rec: Any, dotted: str) -> tuple[Any, str | int]:
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for p in parts[:-1]:
        rec = rec[p]
    return rec, parts[-1]


def get(rec: Any, dotted: str) -> Any:
    """The field's value; None for a key the record lacks (the operator then adds it)."""
    parent, last = _path(rec, dotted)
    return parent.get(last) if isinstance(parent, dict) else parent[last]


def put(rec: Any, dotted: str, value: Any) -> None:
    parent, last = _path(rec, dotted)
    parent[last] = value


def delete(rec: Any, dotted: str) -> None:
    parent, last = _path(rec, dotted)
    del parent[last]


def wrong_type(v: Any) -> Any:
    if isinstance(v, bool):
        return "abc"
    if isinstance(v, str):
        return 12345
    if isinstance(v, int | float):
        return "abc"
    if isinstance(v, list):
        return "x"
    if isinstance(v, dict):
        return [1, 2]
    return [1]


DEEP_MARK = "__deeply_nested__"
DEEP_TEXT = "[" * DEEP + "1" + "]" * DEEP
"""A field set to ``DEEP_MARK`` is written as ``DEEP_TEXT`` (json.dumps cannot nest that deep)."""


VALUE_OPS: dict[str, Callable[[Any], Any]] = {
    "wrong_type": wrong_type,
    "bool": lambda v: True,
    "huge": lambda v: HUGE,
    "negative": lambda v: -1,
    "empty_string": lambda v: "",
    "nul": lambda v: f"{v}\x00x",
    "control": lambda v: f"\x1b[31m{v}\x07",
    "bidi": lambda v: f"\u202e{v}",
    "long_string": lambda v: "w" * LONG,
}
"""Operators that replace one field's value (the old value given)."""
INT_OPS = ("bool", "huge", "negative")
STR_OPS = ("empty_string", "nul", "control", "bidi", "long_string")
FILE_OPS = ("truncated", "garbage", "empty_file", "invalid_utf8", "directory", "fifo", "dangling_symlink", "unreadable")


def apply_file_op(path: Path, op: str) -> None:
    data = path.read_bytes() if path.is_file() else b""
    if op == "truncated":
        path.write_bytes(data[: max(1, len(data) // 2)])
    elif op == "garbage":
        path.write_bytes(random.Random(0).randbytes(4096))
    elif op == "empty_file":
        path.write_bytes(b"")
    elif op == "invalid_utf8":
        path.write_bytes(data[: len(data) // 3] + b"\xc3\x28\xff\xfe" + data[len(data) // 3 :])
    elif op in ("directory", "fifo", "dangling_symlink"):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if op == "directory":
            path.mkdir()
        elif op == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(path.with_name("no-such-file-" + path.name))
    elif op == "unreadable":
        path.chmod(0)
    else:
        raise ValueError(op)


class Doc:
    """A file's records, edited and written back: JSONL (a list of objects), JSON or YAML (one
    object), CSV (header + rows)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        text = path.read_text(encoding="utf-8")
        if kind == "jsonl":
            self.records: list[Any] = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        elif kind == "json":
            self.records = [json.loads(text)]
        elif kind == "yaml":
            import yaml

            self.records = [yaml.safe_load(text)]
        else:
            self.rows = list(csv.reader(io.StringIO(text)))

    def dump(self, rec: Any) -> str:
        if self.kind == "yaml":  # JSON is YAML: one line, exact values
            return json.dumps(rec, ensure_ascii=False).replace(json.dumps(DEEP_MARK), DEEP_TEXT)
        return json.dumps(rec, ensure_ascii=False, separators=(",", ":")).replace(json.dumps(DEEP_MARK), DEEP_TEXT)

    def write(self, texts: list[str] | None = None) -> None:
        if self.kind == "csv":
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(self.rows)
            self.path.write_text(buf.getvalue(), encoding="utf-8")
            return
        texts = texts if texts is not None else [self.dump(r) for r in self.records]
        self.path.write_text("\n".join(texts) + "\n", encoding="utf-8")


@dataclass
class Case:
    surface: str
    op: str
    where: str
    """The field (or 'file')."""
    file: str
    """The mutated path, relative to the case's tree."""
    mutate: Callable[[Path], None]
    """Given the case's tree."""
    commands: list[tuple[str, list[str]]]
    """(name, argv) in the order run; argv[0] 'probe' is this module's probe, else cocoeval's."""
    oracle: Callable[[Path, dict[str, Result]], str | None] | None = None
    """A silent wrong, described, or None."""

    @property
    def name(self) -> str:
        return f"{self.surface}/{self.op}/{self.where}"


@dataclass
class Result:
    rc: int | None
    out: str
    seconds: float = 0.0

    @property
    def probe(self) -> dict[str, Any] | None:
        for ln in reversed(self.out.splitlines()):
            if ln.startswith("PROBE "):
                return json.loads(ln[6:])
        return None


@dataclass
class Outcome:
    case: Case
    cls: str
    why: str = ""
    results: dict[str, Result] = field(default_factory=dict)


# ----------------------------------------------------------------------------- oracles
def not_counted_ok(stage: str, base: int) -> Callable[[Path, dict[str, Result]], str | None]:
    """The mutated record is refused, or counted invalid / stale: fewer ok than the base run."""

    def check(tree: Path, res: dict[str, Result]) -> str | None:
        r = res.get("probe")
        if r is None or r.rc != 0 or r.probe is None:
            return None  # refused (exit 2, checked for the file's name) or failed (classified)
        n = r.probe[stage]
        return None if n < base else f"the mutated record is counted valid ({stage}: {n} ok of {base})"

    return check


def refused_by(command: str) -> Callable[[Path, dict[str, Result]], str | None]:
    def check(tree: Path, res: dict[str, Result]) -> str | None:
        r = res.get(command)
        if r is not None and r.rc in (0, 3):
            return f"`{command}` accepted it (exit {r.rc})"
        return None

    return check


def import_refused_or_skipped(tree: Path, res: dict[str, Result]) -> str | None:
    r = res["annotate-import"]
    if r.rc == 0 and not any(w in r.out for w in ("not annotated", "skipped", "duplicate", "repaired")):
        return "annotate-import accepted it without a word (exit 0)"
    return None


def sane_usage(tree: Path, res: dict[str, Result]) -> str | None:
    """After `run`, usage.json's all_invocations holds no negative, absurd or non-number total."""
    r = res.get("run")
    if r is None or r.rc not in (0, 3):
        return None
    try:
        usage = json.loads((tree / RUN / "usage.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"run exited {r.rc} but usage.json is unreadable after it ({e})"
    every = usage.get("all_invocations", {})
    for k, v in every.items():
        unknown = k.endswith("cost_usd") and (every.get(k.removesuffix("usd") + "unknown_calls") or 0) > 0
        if v is None and unknown:  # a cost at unknown prices is unknown (null), never $0
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v > 10**15:
            return f"all_invocations.{k} = {v!r}"
    return None


def journal_warned(tree: Path, res: dict[str, Result]) -> str | None:
    if (bad := sane_usage(tree, res)) is not None:
        return bad
    r = res.get("run")
    if r is not None and r.rc in (0, 3) and "usage.journal.jsonl" not in r.out:
        return "a bad journal line was dropped without a warning naming the journal"
    return None


def all_of(*checks: Callable[[Path, dict[str, Result]], str | None]) -> Callable[[Path, dict[str, Result]], str | None]:
    def check(tree: Path, res: dict[str, Result]) -> str | None:
        for c in checks:
            if (bad := c(tree, res)) is not None:
                return bad
        return None

    return check


def says(needle: str, command: str) -> Callable[[Path, dict[str, Result]], str | None]:
    def check(tree: Path, res: dict[str, Result]) -> str | None:
        r = res.get(command)
        if r is not None and r.rc in (0, 3) and needle not in r.out:
            return f"`{command}` exited {r.rc} without naming {needle}"
        return None

    return check


# ----------------------------------------------------------------------------- the surfaces
@dataclass
class Surface:
    name: str
    file: str
    kind: str
    """jsonl, json, yaml, csv, sqlite."""
    commands: list[tuple[str, list[str]]]
    required: list[str] = field(default_factory=list)
    """Fields to delete."""
    ints: list[str] = field(default_factory=list)
    strs: list[str] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)
    """Fields to give a wrong type (besides ints and strs)."""
    breaking: Callable[[str, str], bool] = lambda op, where: False
    """(op, where) -> whether the mutation must not be accepted as valid data (the oracle applies)."""
    oracle: Callable[[Path, dict[str, Result]], str | None] | None = None
    record: Callable[[list[Any], str], int] = lambda recs, where: 0
    """Which record a field mutation edits."""
    file_oracle: bool = True
    """Whether the oracle applies to file-level operators too."""


PROBE = ("probe", ["probe", RUN])
RUN_CMD = ("run", ["run", "p.yaml", "--no-progress"])
EXPORT = (
    "annotate-export",
    ["annotate-export", RUN, "--out", "ae", "--overall-conversations", "2", "--fine-conversations", "2"],
)
ESTIMATE_RUN = ("estimate", ["estimate", "p.yaml", "--run", RUN])
IMPORT = ("annotate-import", ["annotate-import", "ann/filled.csv", RUN, "--key", "ann/key.json"])
RUN_DIR_CMDS = [PROBE, RUN_CMD, EXPORT]


def _judgment_record(recs: list[Any], where: str) -> int:
    want = "fine_grained" if where.startswith("labels") or where.startswith("judged_turns") else "overall"
    return next(i for i, r in enumerate(recs) if r.get("kind") == want)


def _param_breaking(op: str, where: str) -> bool:
    if op == "truncated":  # half a YAML file may still be a valid (shorter) params file
        return False
    if op in ("delete", "wrong_type", "duplicate_key", "duplicate_record", "deep", *FILE_OPS):
        return not (
            op == "delete"
            and where in ("llm.concurrency", "setups.0.temperature", "llm.cache", "judges.0.kind", "setups")
        )
    if op in INT_OPS:
        return not (op == "huge" and where in ("build.options.per_dataset", "setups.0.max_per_dataset"))
    return op in ("empty_string", "nul", "control", "bidi")


SURFACES = [
    Surface(
        "params",
        "p.yaml",
        "yaml",
        [("check", ["check", "p.yaml"]), ("estimate", ["estimate", "p.yaml"]), RUN_CMD],
        required=["name", "setups.0.model", "setups.0.name", "setups", "llm.concurrency", "judges.0.kind"],
        ints=[
            "setups.0.turns_per_call",
            "llm.concurrency",
            "setups.0.max_per_dataset",
            "judges.0.max_attempts",
            "build.options.per_dataset",
        ],
        strs=["name", "setups.0.name", "setups.0.model", "judges.0.name"],
        typed=["setups", "judges.0.kind", "setups.0.temperature", "llm"],
        breaking=_param_breaking,
        oracle=refused_by("check"),
    ),
    Surface(
        "bench",
        "bench/eval.jsonl",
        "jsonl",
        [
            ("show", ["show", "bench", "qmsum_product/M0/12"]),
            ("check", ["check", "pb.yaml"]),
            ("run", ["run", "pb.yaml", "--no-progress"]),
        ],
        required=["id", "reference", "history", "metadata", "split"],
        ints=["provenance.start_index", "summary.covers_turns"],
        strs=["id", "reference.0.text", "reference.0.speaker", "history.0.text"],
        typed=["reference", "metadata.goals", "history.0"],
        breaking=lambda op, where: (
            op
            in (
                "delete",
                "wrong_type",
                "duplicate_key",
                "duplicate_record",
                "deep",
                "truncated",
                "garbage",
                "invalid_utf8",
            )
            or (where == "id" and op in STR_OPS)
        ),
        oracle=refused_by("run"),
        file_oracle=False,
    ),
    Surface(
        "instances",
        f"{RUN}/instances.jsonl",
        "jsonl",
        [*RUN_DIR_CMDS, ESTIMATE_RUN],
        required=["id", "reference", "history", "metadata"],
        ints=["provenance.start_index"],
        strs=["id", "reference.0.text", "reference.0.speaker"],
        typed=["reference", "metadata.goals"],
        breaking=lambda op, where: not (where == "provenance.start_index" and op in ("delete", "huge")),
        oracle=not_counted_ok("continuations_ok", N_CONT),
        file_oracle=False,
    ),
    Surface(
        "continuations",
        f"{RUN}/continuations/s.jsonl",
        "jsonl",
        [*RUN_DIR_CMDS, ESTIMATE_RUN],
        required=["instance_id", "setup_id", "turns", "status", "instance_hash"],
        ints=["calls.0.output_tokens", "calls.0.input_tokens"],
        strs=["instance_id", "setup_id", "turns.0.text", "turns.0.speaker"],
        typed=["turns", "status", "calls", "turns.0"],
        breaking=lambda op, where: (
            not (
                (op == "delete" and where in ("status", "instance_hash"))
                or (where in ("turns.0.text", "turns.0.speaker") and op in ("nul", "control", "bidi"))
                or (where == "turns.0.speaker" and op in ("empty_string", "long_string"))
                or (op in ("huge", "negative", "bool") and where.startswith("calls."))
            )
        ),
        oracle=not_counted_ok("continuations_ok", N_CONT),
    ),
    Surface(
        "judgments",
        f"{RUN}/judgments/j.jsonl",
        "jsonl",
        [PROBE, RUN_CMD],
        required=["instance_id", "target", "judge_id", "kind", "consistency", "taxonomy_hash", "labels"],
        ints=["consistency", "collaborativeness", "labels.0.turn", "judged_turns.0"],
        strs=["instance_id", "target", "judge_id", "rationale"],
        typed=["labels", "kind", "judged_turns", "labels.0.behaviours"],
        record=_judgment_record,
        breaking=lambda op, where: not (where == "rationale" or (op == "delete" and where == "labels")),
        oracle=not_counted_ok("judgments_ok", N_JUDG),
    ),
    Surface(
        "manifest",
        f"{RUN}/manifest.json",
        "json",
        [*RUN_DIR_CMDS, ESTIMATE_RUN],
        required=["status", "setups", "judges", "taxonomy", "instances", "cocoeval_version"],
        ints=["instances"],
        strs=["status", "cocoeval_version", "name"],
        typed=["setups", "judges", "taxonomy"],
    ),
    Surface(
        "usage",
        f"{RUN}/usage.json",
        "json",
        [RUN_CMD, ESTIMATE_RUN],
        required=["totals", "rows", "all_invocations"],
        ints=["totals.input_tokens", "totals.calls", "all_invocations.cost_usd", "requests_sent"],
        strs=["invocation"],
        typed=["totals", "earlier_invocations", "rows"],
        breaking=lambda op, where: True,
        oracle=sane_usage,
    ),
    Surface(
        "journal",
        f"{RUN}/usage.journal.jsonl",
        "jsonl",
        [RUN_CMD, ESTIMATE_RUN],
        required=["invocation", "stage"],
        ints=["input_tokens", "calls", "cost_unknown_calls"],
        strs=["invocation", "model"],
        typed=["input_tokens"],
        breaking=lambda op, where: (
            (op == "delete" and where == "invocation")
            or (
                op not in ("delete", "duplicate_record", "empty_file", "dangling_symlink", "unreadable", "truncated")
                and where != "model"
                and not (where == "invocation" and op in ("nul", "control", "bidi", "long_string"))
            )
        ),
        oracle=journal_warned,
    ),
    Surface(
        "annotation_csv",
        "ann/filled.csv",
        "csv",
        [IMPORT],
        required=["annotator", "item_id", "turn", "behaviours", "consistency"],
        ints=["consistency", "collaborativeness", "turn"],
        strs=["annotator", "item_id", "behaviours"],
        typed=["consistency", "turn", "behaviours"],
        breaking=lambda op, where: (
            op not in ("empty_file", "truncated")
            and not (  # half a sheet: fewer rows
                where in ("behaviours", "consistency") and op in ("empty_string", "delete")
            )
        ),
        oracle=import_refused_or_skipped,
    ),
    Surface(
        "annotation_key",
        "ann/key.json",
        "json",
        [IMPORT],
        required=["{item}.instance_id", "{item}.target", "{item}.tasks"],
        strs=["{item}.instance_id", "{item}.target"],
        typed=["{item}", "{item}.tasks"],
        breaking=lambda op, where: not where.endswith(".tasks"),  # the import reads rows, not tasks
        oracle=refused_by("annotate-import"),
    ),
    Surface("cache", "cache.sqlite", "sqlite", [RUN_CMD, ("batches", ["batches", "--cache", "cache.sqlite"])]),
    Surface(
        "source",
        "src/product/M0.json",
        "json",
        [("build", ["build", "--source", "qmsum:src", "--out", "b2"]), ("check", ["check", "p.yaml"]), RUN_CMD],
        required=["meeting_transcripts", "meeting_transcripts.0.speaker", "meeting_transcripts.0.content"],
        strs=["meeting_transcripts.0.speaker", "meeting_transcripts.0.content"],
        typed=["meeting_transcripts", "meeting_transcripts.0", "topic_list"],
        breaking=lambda op, where: (
            op
            in (
                "truncated",
                "garbage",
                "invalid_utf8",
                "directory",
                "fifo",
                "dangling_symlink",
                "unreadable",
                "empty_file",
            )
        ),
        oracle=says("M0.json", "build"),
    ),
]


def _expand(where: str, rec: Any) -> str:
    if "{item}" in where:
        return where.replace("{item}", sorted(rec)[0])
    return where


def _field_case(s: Surface, op: str, where: str) -> Case:
    def mutate(tree: Path) -> None:
        doc = Doc(tree / s.file, s.kind)
        if s.kind == "csv":
            _csv_op(doc, op, where)
            doc.write()
            return
        i = s.record(doc.records, where)
        rec = doc.records[i]
        w = _expand(where, rec)
        if op == "delete":
            delete(rec, w)
        elif op == "deep":
            put(rec, w, DEEP_MARK)
        elif op == "duplicate_key":  # the key written twice: a first value, then the real one
            texts = [doc.dump(r) for r in doc.records]
            first = json.dumps(wrong_type(get(rec, w)) if w.count(".") == 0 else "dup")
            top = w.split(".")[0]
            texts[i] = texts[i].replace("{", "{" + json.dumps(top) + ":" + first + ",", 1)
            doc.write(texts)
            return
        else:
            put(rec, w, VALUE_OPS[op](get(rec, w)))
        doc.write()

    return Case(s.name, op, where, s.file, mutate, s.commands, s.oracle if s.breaking(op, where) else None)


def _csv_op(doc: Doc, op: str, where: str) -> None:
    head, rows = doc.rows[0], doc.rows[1:]
    col = head.index(where)
    overall = next(r for r in rows if not r[head.index("turn")])
    target = overall if where in ("consistency", "collaborativeness") else rows[0]
    if op == "delete":
        doc.rows = [[c for j, c in enumerate(r) if j != col] for r in doc.rows]
    elif op == "duplicate_key":  # the column named twice, the first copy with another value
        doc.rows = [
            [*r[:col], ("3" if r[col].isdigit() else r[col]) if k else r[col], *r[col:]] for k, r in enumerate(doc.rows)
        ]
    elif op == "wrong_type":
        target[col] = "abc"
    elif op == "bool":
        target[col] = "true"
    elif op == "huge":
        target[col] = str(HUGE)
    elif op == "negative":
        target[col] = "-1"
    else:
        target[col] = VALUE_OPS[op](target[col])


def _record_case(s: Surface, op: str) -> Case:
    def mutate(tree: Path) -> None:
        doc = Doc(tree / s.file, s.kind)
        if s.kind == "csv":
            doc.rows.append(list(doc.rows[1]))
        elif s.kind == "jsonl":
            doc.records.append(doc.records[0])
        elif s.name == "params":
            doc.records[0]["setups"].append(doc.records[0]["setups"][0])
        doc.write()

    return Case(s.name, op, "record", s.file, mutate, s.commands, s.oracle if s.breaking(op, "record") else None)


def _file_case(s: Surface, op: str) -> Case:
    def mutate(tree: Path) -> None:
        apply_file_op(tree / s.file, op)

    oracle = s.oracle if s.breaking(op, "file") and s.file_oracle else None
    if s.name == "source" and op == "dangling_symlink":  # beside the files, not in place of one

        def mutate(tree: Path) -> None:
            (tree / "src" / "product" / "M9.json").symlink_to(tree / "src" / "gone.json")

        oracle = says("M9.json", "build")
    return Case(s.name, op, "file", s.file, mutate, s.commands, oracle)


def _journal_case(s: Surface, op: str, where: str) -> Case:
    """The journal's lines of usage.json's own invocation are not read again: the mutated line is
    one of an invocation killed before its usage.json, followed by a readable line of it."""

    def mutate(tree: Path) -> None:
        path = tree / s.file
        line = {
            "invocation": "killed0123456789",
            "stage": "simulate",
            "model": "openai-compatible/fake",
            "at": 1.0,
            "calls": 1,
            "input_tokens": 100,
            "cost_unknown_calls": 1,
        }
        if op == "delete":
            del line[where]
            text = json.dumps(line)
        elif op == "deep":
            line[where] = DEEP_MARK
            text = json.dumps(line).replace(json.dumps(DEEP_MARK), DEEP_TEXT)
        elif op == "duplicate_key":
            text = json.dumps(line).replace("{", '{"' + where + '": "x", ', 1)
        else:
            line[where] = VALUE_OPS[op](line[where])
            text = json.dumps(line)
        ok = {
            "invocation": "killed0123456789",
            "stage": "judge",
            "model": "openai-compatible/fake",
            "at": 2.0,
            "calls": 1,
            "input_tokens": 50,
            "cost_unknown_calls": 1,
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n" + json.dumps(ok) + "\n")

    return Case(s.name, op, where, s.file, mutate, s.commands, s.oracle if s.breaking(op, where) else None)


CACHE_ROW_OPS = {
    "not_json": "UPDATE calls SET response = 'not json {'",
    "old_format": 'UPDATE calls SET response = \'{"text": "x"}\'',
    "wrong_type": "UPDATE calls SET response = '[1, 2]'",
    "deep": f"UPDATE calls SET response = '{DEEP_TEXT}'",
    "huge": "UPDATE calls SET created = 1e300",
    "empty_string": "UPDATE calls SET response = ''",
    "nul": "UPDATE calls SET response = response || char(0)",
    "no_calls_table": "DROP TABLE calls",
    "no_meta_table": "DROP TABLE meta",
    "meta_garbage": "UPDATE meta SET value = 'garbage'",
}


def _cache_case(s: Surface, op: str) -> Case:
    def mutate(tree: Path) -> None:
        db = sqlite3.connect(tree / s.file)
        db.execute(CACHE_ROW_OPS[op])
        db.commit()
        db.close()

    return Case(s.name, op, "rows", s.file, mutate, s.commands, sane_usage)


def cases() -> list[Case]:
    out: list[Case] = []
    for s in SURFACES:
        if s.kind == "sqlite":
            out += [_cache_case(s, op) for op in CACHE_ROW_OPS]
            out += [_file_case(s, op) for op in FILE_OPS]
            continue
        make = _journal_case if s.name == "journal" else _field_case
        out += [make(s, "delete", w) for w in s.required]
        out += [make(s, "wrong_type", w) for w in (*s.typed, *s.ints, *s.strs)]
        out += [make(s, op, w) for op in INT_OPS for w in s.ints]
        out += [make(s, op, w) for op in STR_OPS for w in s.strs]
        if s.kind in ("jsonl", "json", "yaml", "csv"):
            first = (s.required or s.strs)[0]
            out.append(make(s, "duplicate_key", first))
        if s.kind != "csv":
            out.append(make(s, "deep", (s.typed or s.required)[0]))
        if s.kind in ("jsonl", "csv") or s.name == "params":
            out.append(_record_case(s, "duplicate_record"))
        out += [_file_case(s, op) for op in FILE_OPS]
    unique = {c.name: c for c in reversed(out)}  # a field listed under two operators' lists: once
    return [c for c in out if unique.pop(c.name, None) is c and not (c.op == "unreadable" and IS_ROOT)]


SAMPLE = [
    "params/bool/setups.0.turns_per_call",
    "params/huge/llm.concurrency",
    "params/duplicate_key/name",
    "params/duplicate_record/record",
    "params/deep/setups",
    "params/fifo/file",
    "params/bidi/setups.0.name",
    "bench/delete/reference",
    "bench/truncated/file",
    "instances/wrong_type/reference",
    "instances/duplicate_record/record",
    "continuations/delete/turns",
    "continuations/duplicate_record/record",
    "continuations/long_string/turns.0.text",
    "continuations/garbage/file",
    "judgments/bool/consistency",
    "judgments/huge/labels.0.turn",
    "judgments/directory/file",
    "manifest/truncated/file",
    "manifest/wrong_type/setups",
    "usage/garbage/file",
    "usage/negative/totals.input_tokens",
    "journal/wrong_type/input_tokens",
    "journal/negative/calls",
    "annotation_csv/duplicate_key/annotator",
    "annotation_csv/huge/consistency",
    "annotation_key/delete/{item}.target",
    "cache/not_json/rows",
    "cache/old_format/rows",
    "cache/fifo/file",
    "source/dangling_symlink/file",
    "source/truncated/file",
]
"""The fixed sample ``tests/test_hostile_classes.py`` runs: the issue's listed examples and one or
two of each other class."""


# ----------------------------------------------------------------------------- running
def probe(run_dir: str) -> int:
    """Open the run and count its frames as ``cocoeval report`` does; print ``PROBE {json}``."""
    from cocoeval.analysis.frames import invalid_rates, run_frames
    from cocoeval.core.errors import CocoevalError
    from cocoeval.run import Run

    try:
        run = Run.open(run_dir)
        f = run_frames(run)
        invalid_rates(f)
        warnings = run.integrity_warnings()
    except CocoevalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    conts = f.continuations.filter(f.continuations["status"] == "ok").height if f.continuations.height else 0
    judg = f.judgments.filter(f.judgments["status"].is_in(["ok", "repaired"])).height if f.judgments.height else 0
    print(
        "PROBE "
        + json.dumps(
            {"continuations_ok": conts, "judgments_ok": judg, "instances": len(run.instances), "warnings": warnings}
        )
    )
    return 0


def run_command(tree: Path, argv: list[str], timeout: float) -> Result:
    import time

    cmd = (
        [PY, str(Path(__file__).resolve()), "--probe", *argv[1:]]
        if argv[0] == "probe"
        else [PY, "-m", "cocoeval", *argv]
    )
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=tree, capture_output=True, timeout=timeout, env=env(), stdin=subprocess.DEVNULL)
        rc: int | None = p.returncode
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = None, ((e.stdout or b"") + (e.stderr or b"")).decode("utf-8", "replace")
    return Result(rc, out, time.monotonic() - t)


def run_case(case: Case, base: Path, work: Path, timeout: float, report: bool = False, n: int = 0) -> Outcome:
    tree = work / f"{n:04d}"
    try:
        shutil.copytree(base, tree, symlinks=True)
        try:
            case.mutate(tree)
        except Exception as e:  # the campaign's own bug: listed, never counted as a result
            return Outcome(case, "harness", f"the mutation failed: {type(e).__name__}: {e}")
        commands = list(case.commands)
        if report and any(a[0] == "probe" for _, a in commands):
            commands.append(("report", ["report", RUN, "--out", "rep", "--resamples", "20"]))
        results: dict[str, Result] = {}
        for name, argv in commands:
            results[name] = run_command(tree, argv, timeout)
        return classify(case, tree, results)
    finally:
        for p in tree.rglob("*"):  # an unreadable file must not stop the clean-up
            if not p.is_symlink() and p.exists():
                p.chmod(0o700 if p.is_dir() else 0o600)
        shutil.rmtree(tree, ignore_errors=True)


def classify(case: Case, tree: Path, results: dict[str, Result]) -> Outcome:
    name = Path(case.file).name
    for cmd, r in results.items():  # `cocoeval check` exits 1 when something is missing, each listed (documented)
        if cmd == "check" and r.rc == 1 and "missing: " in r.out and "internal error" not in r.out:
            results[cmd] = Result(2, r.out, r.seconds)
    for cls in ("hang", "internal", "unclear"):
        for cmd, r in results.items():
            if cls == "hang" and r.rc is None:
                return Outcome(case, "hang", f"{cmd}: no answer in the timeout", results)
            if (
                cls == "internal"
                and r.rc is not None
                and (r.rc not in (0, 2, 3) or "Traceback" in r.out or "internal error" in r.out)
            ):
                return Outcome(case, "internal", f"{cmd}: exit {r.rc}", results)
            if cls == "unclear" and r.rc == 2 and name not in r.out and case.file not in r.out:
                return Outcome(case, "unclear", f"{cmd}: exit 2 without naming {name}", results)
    if case.oracle is not None and (why := case.oracle(tree, results)) is not None:
        return Outcome(case, "silent", why, results)
    return Outcome(case, "clean", "", results)


CLASSES = ("clean", "internal", "hang", "unclear", "silent", "harness")


def campaign(
    chosen: Iterable[Case], *, jobs: int = 2, timeout: float = 30, report: bool = False, srv: Any | None = None
) -> list[Outcome]:
    chosen = list(chosen)
    with base_tree(srv) as (tmp, _server):
        work = tmp / "cases"
        work.mkdir()
        with ThreadPoolExecutor(jobs) as pool:
            return list(
                pool.map(lambda nc: run_case(nc[1], tmp / "base", work, timeout, report, nc[0]), enumerate(chosen))
            )


def table(outcomes: list[Outcome]) -> str:
    by: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        by[(o.case.surface, o.case.op)][o.cls] += 1
    lines = [f"{'surface':16} {'operator':18} " + " ".join(f"{c:>8}" for c in CLASSES)]
    for surface in dict.fromkeys(o.case.surface for o in outcomes):
        for (s, op), n in by.items():
            if s == surface:
                lines.append(f"{s:16} {op:18} " + " ".join(f"{n[c]:>8}" for c in CLASSES))
    total: Counter[str] = Counter(o.cls for o in outcomes)
    lines.append(f"{'all':16} {f'{len(outcomes)} cases':18} " + " ".join(f"{total[c]:>8}" for c in CLASSES))
    return "\n".join(lines)


def failures(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        if o.cls == "clean":
            continue
        lines.append(f"{o.cls:8} {o.case.name}: {o.why}")
        for cmd, r in o.results.items():
            if r.rc not in (0, 3) or o.cls == "silent":
                tail = " | ".join(ln for ln in r.out.splitlines() if ln.strip())[-300:]
                lines.append(f"           {cmd} -> {r.rc}: {tail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", nargs=1, metavar="RUN_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--surface", action="append", help="only these surfaces (repeatable)")
    ap.add_argument("--op", action="append", help="only these operators (repeatable)")
    ap.add_argument("--sample", action="store_true", help="only the fixed sample the test runs")
    ap.add_argument("--report", action="store_true", help="run `cocoeval report` on the run-directory cases too")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60, help="seconds per command before it counts as a hang")
    a = ap.parse_args(argv)
    if a.probe:
        return probe(a.probe[0])
    chosen = [
        c
        for c in cases()
        if (not a.surface or c.surface in a.surface)
        and (not a.op or c.op in a.op)
        and (not a.sample or c.name in SAMPLE)
    ]
    print(
        f"{len(chosen)} cases, {a.jobs} at a time, {a.timeout:g} s per command"
        + (" (running as root: no unreadable-file cases)" if IS_ROOT else ""),
        flush=True,
    )
    outcomes = campaign(chosen, jobs=a.jobs, timeout=a.timeout, report=a.report)
    print(table(outcomes))
    if bad := failures(outcomes):
        print("\nnot clean:\n" + bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
