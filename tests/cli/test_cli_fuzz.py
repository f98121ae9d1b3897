"""Property-based: every ``cocoeval`` command, given malformed files or bad arguments, exits with
code 2 and a message naming the file or the option — never a traceback, never a request sent.

The commands and their options are read from ``build_parser()``, so a new command or option is
driven too: positional paths (and input path options) get malformed files, folders in place of
files and missing paths; numeric options get values outside the bounds their converter carries
(see ``cocoeval.cli._args``); output options get a file where a folder belongs and the reverse.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cocoeval.cli import build_parser, main

_DEEP = int(os.environ.get("COCOEVAL_FUZZ_EXAMPLES", "0"))
SETTINGS = settings(
    max_examples=_DEEP or 12,
    deadline=None,
    derandomize=not _DEEP,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
"""CI: 12 fixed examples per command and test, a few seconds each. A longer random hunt:
COCOEVAL_FUZZ_EXAMPLES=500 pytest tests/cli/test_cli_fuzz.py"""


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = sorted(_subparsers())
SOURCE_KINDS = ["qmsum", "convokit", "tcr", "chat"]
INNER_FILES = [
    "eval.jsonl",
    "train.jsonl",
    "manifest.json",
    "instances.jsonl",
    "utterances.jsonl",
    "conversations.json",
    "speakers.json",
    "corpus.json",
    "M.json",
    "x.jsonl",
    "continuations/s.jsonl",
    "judgments/j.jsonl",
]
"""Names a folder argument may be read for (benchmark, run, ConvoKit corpus, source folders)."""
_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_BASE_URL",
    "HF_TOKEN",
)


# ----------------------------------------------------------------------------- malformed contents
_REAL = json.dumps(
    {
        "name": "x",
        "bench": "b",
        "meeting_transcripts": [{"speaker": "A", "content": "hi"}],
        "topics": {"t": {"transcripts": []}},
        "messages": [{"role": "user", "content": "hi"}],
    }
)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
_not_str = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False))
wrong_types = st.one_of(  # JSON of a shape no cocoeval file has (and that no reader takes as "nothing")
    _scalar,
    st.lists(_scalar, min_size=1, max_size=4),
    st.dictionaries(st.text(max_size=12), _not_str, min_size=1, max_size=4),
).map(lambda v: (json.dumps(v) + "\n").encode())
contents = st.one_of(
    st.binary(min_size=1, max_size=200),  # random bytes
    st.binary(max_size=40).map(lambda b: b + b"\xc3\x28\xff"),  # invalid UTF-8
    st.integers(1, len(_REAL) - 1).map(lambda n: _REAL[:n].encode()),  # truncated JSON
    wrong_types,
    st.lists(wrong_types, min_size=1, max_size=3).map(b"".join),  # JSONL of wrong types
    st.integers(1500, 20000).map(lambda n: ("[" * n + "]" * n).encode()),  # nested too deep
    st.integers(1500, 5000).map(lambda n: ('{"a":' * n + "1" + "}" * n).encode()),
    st.sampled_from([b"", b"  \n\n", b"\xef\xbb\xbf"]),  # empty
)
# a file, a folder of malformed files, an empty folder, or nothing there
fs_objects = st.one_of(
    st.tuples(st.just("file"), contents),
    st.tuples(st.just("dir"), st.dictionaries(st.sampled_from(INNER_FILES), contents, max_size=4)),
    st.just(("missing", None)),
)
input_files = st.one_of(st.tuples(st.just("file"), contents.filter(bool)), st.just(("dir", {})))
"""For optional inputs, where an absent path can be legitimate (no cache yet) and an empty file is
a new SQLite database."""


def _make(root: Path, name: str, obj: tuple) -> Path:
    kind, payload = obj
    p = root / name
    if kind == "file":
        p.write_bytes(payload)
    elif kind == "dir":
        p.mkdir()
        for inner, data in payload.items():
            (p / inner).parent.mkdir(parents=True, exist_ok=True)
            (p / inner).write_bytes(data)
    return p


# ----------------------------------------------------------------------------- running
@contextlib.contextmanager
def _offline() -> Iterator[list]:
    """No API key in the environment and no TCP connection possible: a command that tried to send
    anything fails the test."""
    attempts: list = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError("network use in a test")
        real_connect(self, address)

    saved = {k: os.environ.pop(k) for k in _KEYS if k in os.environ}
    socket.socket.connect = connect  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        os.environ.update(saved)


def invoke(argv: list[str]) -> tuple[object, str]:
    out, err = io.StringIO(), io.StringIO()
    with _offline() as attempts, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = main(argv)
        except SystemExit as e:  # argparse
            code = e.code
    assert not attempts, f"{argv} tried to reach {attempts}"
    return code, out.getvalue() + err.getvalue()


def assert_clear_error(argv: list[str], code: object, output: str, names: list[str]) -> None:
    assert "Traceback" not in output and "internal error" not in output, (argv, output)
    assert code == 2, (argv, code, output)
    assert "error" in output, (argv, output)
    assert any(n in output for n in names), (argv, names, output)


def _is_output(action: argparse.Action) -> bool:
    return getattr(action.type, "kind", None) in ("out_dir", "out_file")


def _path_slots(parser: argparse.ArgumentParser) -> tuple[list[argparse.Action], list[argparse.Action]]:
    """(positional arguments, optional input-path options) a command reads from."""
    positional = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._HelpAction)]
    inputs = [
        a
        for a in parser._actions
        if a.option_strings and (a.type is Path or (getattr(a.type, "kind", None) == "out_file" and "cache" in a.dest))
    ]
    return positional, inputs


# ----------------------------------------------------------------------------- malformed files
@pytest.mark.parametrize("command", COMMANDS)
@SETTINGS
@given(data=st.data())
def test_malformed_files_give_a_clear_error(command, data):
    parser = _subparsers()[command]
    positional, inputs = _path_slots(parser)
    sources = [a for a in parser._actions if a.dest == "source"]
    if not positional and not sources and not inputs:
        pytest.skip(f"{command} reads no file of the user's (its options are fuzzed below)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        argv, names = [command], []
        for a in positional:
            if a.type is Path or (a.type is None and a.dest in ("file", "path")):
                p = _make(root, a.dest, data.draw(fs_objects, label=a.dest))
                argv.append(str(p))
                names.append(str(p))
            else:  # an id or a name (one outside the choices, where the argument has them)
                argv.append(
                    "id-"
                    + data.draw(
                        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=10), label=a.dest
                    )
                )
                if a.choices is not None:
                    names.append(f"argument {a.dest}: invalid choice")
        for a in sources:
            kind = data.draw(st.sampled_from(SOURCE_KINDS), label="kind")
            p = _make(root, "source", data.draw(fs_objects, label="source"))
            argv += [a.option_strings[-1], f"{kind}:{p}"]
            names.append(str(p))
        for a in inputs:
            if a.required or not (positional or sources) or data.draw(st.booleans(), label=f"give {a.dest}"):
                p = _make(root, a.dest, data.draw(input_files, label=a.dest))
                argv += [a.option_strings[-1], str(p)]
                names.append(str(p))
        # of a group of alternatives (notebooks: --out or --copy), one drawn
        chosen = [
            data.draw(st.sampled_from(g._group_actions), label="alternative") for g in parser._mutually_exclusive_groups
        ]
        for a in parser._actions:  # outputs go to fresh folders, never into the working tree
            if a not in chosen and any(a in g._group_actions for g in parser._mutually_exclusive_groups):
                continue
            if _is_output(a) and a not in inputs:
                argv += [a.option_strings[-1], str(root / f"out-{a.dest}")]
            elif a.required and a.option_strings and a.dest != "source" and a.type is not Path:
                # a valid number where one is required (annotate-next --budget): the file is what is fuzzed here
                argv += [a.option_strings[-1], "1" if getattr(a.type, "kind", None) in ("int", "float") else "x"]
        if command == "finetune":
            argv += ["--model", "gpt-4.1-mini"]
        code, output = invoke(argv)
        assert_clear_error(argv, code, output, names)


# ----------------------------------------------------------------------------- bad option values
def _bad_values(action: argparse.Action) -> st.SearchStrategy[str] | None:
    """Values the option must refuse, or None when it takes any text."""
    t = action.type
    kind = getattr(t, "kind", None)
    junk = st.sampled_from(["", "abc", "1x", "0x10", "1e", "1_0_", "½"])
    if kind == "int":
        out = [st.integers(max_value=t.lo - 1).map(str), st.floats(allow_nan=False).map(repr)]
        if t.hi is not None:
            out.append(st.integers(min_value=t.hi + 1).map(str))
        return st.one_of(junk, *out)
    if kind == "float":
        below = st.floats(max_value=t.lo, exclude_max=not t.lo_open, allow_nan=False).map(repr)
        out = [below, st.sampled_from(["nan", "inf", "-inf", "1e999"])]
        if t.hi is not None:
            out.append(st.floats(min_value=t.hi, exclude_min=True).map(repr))
        return st.one_of(junk, *out)
    if t is int:
        return st.one_of(junk, st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)).map(repr))
    if t is float:
        return junk
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return st.text(max_size=8).filter(lambda s: s not in action.choices and not s.startswith("-"))
    return None


def _value_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and a.nargs != 0 and (_bad_values(a) is not None or _is_output(a))
    ]


@pytest.mark.parametrize("command", COMMANDS)
@SETTINGS
@given(data=st.data())
def test_bad_option_values_give_a_clear_error(command, data):
    options = _value_options(_subparsers()[command])
    if not options:
        pytest.skip(f"{command} has no option with a checked value")
    a = data.draw(st.sampled_from(options), label="option")
    with tempfile.TemporaryDirectory() as tmp:
        if _is_output(a):  # a file where a folder belongs, or the reverse, or under a file
            blocker = Path(tmp) / "blocker"
            if a.type.kind == "out_dir":
                blocker.write_text("x")
                value = str(data.draw(st.sampled_from([blocker, blocker / "sub"]), label="out"))
            else:
                blocker.mkdir()
                value = str(blocker)
        else:
            value = data.draw(_bad_values(a), label="value")
        opt = a.option_strings[-1]
        argv = [command, f"{opt}={value}"]  # '=' keeps values such as '-5' or '--' a value
        code, output = invoke(argv)
        assert_clear_error(argv, code, output, [opt])


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_options_and_missing_arguments_give_a_clear_error(command):
    code, output = invoke([command, "--no-such-option"])
    assert_clear_error([command], code, output, ["--no-such-option", "required"])
    parser = _subparsers()[command]
    required = [a for a in parser._actions if a.required or (not a.option_strings and a.nargs is None)]
    if required:
        code, output = invoke([command])
        assert_clear_error([command], code, output, [required[0].dest, *required[0].option_strings])


def test_every_command_is_driven():
    """The fuzz tests above draw their commands from the parser: nothing to list by hand."""
    assert {
        "build",
        "show",
        "run",
        "check",
        "estimate",
        "report",
        "notebooks",
        "batches",
        "sft-export",
        "annotate-export",
        "annotate-import",
        "finetune",
        "demo-data",
        "fetch",
    } <= set(COMMANDS)
    checked = {c for c in COMMANDS if _value_options(_subparsers()[c])}
    assert {"build", "show", "run", "report", "notebooks", "batches", "sft-export", "demo-data"} <= checked
