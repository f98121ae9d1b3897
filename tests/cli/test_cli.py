from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cocoeval import cli
from cocoeval.cli import main
from cocoeval.core.text import md_escape, visible
from cocoeval.run import Run

from ..conftest import qmsum_meeting, write_json


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cocoeval", *args], capture_output=True, text=True)


def test_build_is_byte_identical_and_show_prints(tmp_path, capsys):
    for i in range(4):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(150 + 10 * i))
    outs = []
    for k in ("a", "b"):
        rc = main(
            [
                "build",
                "--source",
                f"qmsum:{tmp_path / 'src'}",
                "--out",
                str(tmp_path / k),
                "--per-dataset",
                "2",
                "--seed",
                "3",
            ]
        )
        assert rc == 0
        outs.append({f: (tmp_path / k / f).read_bytes() for f in ("eval.jsonl", "train.jsonl", "report.json")})
    assert outs[0] == outs[1]
    report = json.loads(outs[0]["report.json"])
    assert report["datasets"]["qmsum_product"]["eval_instances"] == 2
    first = json.loads(outs[0]["eval.jsonl"].splitlines()[0])
    capsys.readouterr()
    assert main(["show", str(tmp_path / "a"), first["id"]]) == 0
    shown = capsys.readouterr().out
    assert "History x (30 turns)" in shown and "Reference r (30 turns)" in shown
    assert first["history"][0]["text"] in shown.replace("\n  ", " ")


def test_bad_input_exits_nonzero_naming_file_and_record(tmp_path):
    write_json(tmp_path / "src" / "ok.json", qmsum_meeting(100))
    write_json(
        tmp_path / "src" / "broken.json",
        {"meeting_transcripts": [{"speaker": "A", "content": "x"}, {"speaker": None, "content": "y"}]},
    )
    p = _run("build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "o"))
    assert p.returncode != 0
    assert "broken.json" in p.stderr and "meeting_transcripts.1.speaker" in p.stderr
    assert "Traceback" not in p.stderr
    p = _run(
        "build",
        "--source",
        f"qmsum:{tmp_path / 'src'}",
        "--out",
        str(tmp_path / "o"),
        "--on-error",
        "skip",
        "--per-dataset",
        "1",
    )
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["sources"][0]["skipped"][0]["file"].endswith("broken.json")


def test_nothing_buildable_is_an_error(tmp_path):
    write_json(tmp_path / "short.json", qmsum_meeting(10))
    p = _run("build", "--source", f"qmsum:{tmp_path}", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "no instance could be built from qmsum:" in p.stderr
    assert "report.json" in p.stderr and "how to fix" in p.stderr


def test_show_unknown_id_and_unknown_source(tmp_path):
    write_json(tmp_path / "m.json", qmsum_meeting(100))
    assert main(["build", "--source", f"qmsum:{tmp_path}", "--out", str(tmp_path / "o")]) == 0
    p = _run("show", str(tmp_path / "o"), "nope")
    assert p.returncode == 2 and "no instance 'nope'" in p.stderr
    p = _run("build", "--source", "excel:x", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "unknown source kind" in p.stderr


def test_help_texts():
    p = _run("build", "--help")
    assert p.returncode == 0 and "--per-dataset" in p.stdout and "KIND:PATH" in p.stdout


def _invoke(*argv: object) -> tuple[object, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue() + err.getvalue()


@pytest.fixture
def bench(tmp_path):
    write_json(tmp_path / "src" / "M.json", qmsum_meeting(120))
    assert (
        main(["build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "b"), "--per-dataset", "1"])
        == 0
    )
    return tmp_path / "b"


def test_the_reported_bad_inputs_give_exit_2_and_name_what_to_fix(tmp_path, bench, monkeypatch):
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    src = f"qmsum:{tmp_path / 'src'}"
    iid = json.loads((bench / "eval.jsonl").read_text().splitlines()[0])["id"]
    (tmp_path / "afile").write_text("x")
    (tmp_path / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (tmp_path / "adir").mkdir()
    (tmp_path / "cachedir.yaml").write_text(
        f"name: x\nbench: {bench}\nllm: {{cache: {tmp_path / 'adir'}}}\nsetups: [{{name: s, model: openai/gpt-4.1}}]\n"
    )
    (tmp_path / "temp.yaml").write_text(
        f"name: x\nbench: {bench}\nsetups: [{{name: s, model: openai/gpt-4.1, temperature: -1}}]\n"
    )
    (tmp_path / "budget.yaml").write_text(
        f"name: x\nbench: {bench}\njudges: [{{name: j, model: openai/gpt-4.1, max_tokens_overall: 0}}]\n"
    )
    (tmp_path / "rows.jsonl").write_text("[1, 2]\n")
    cases = [
        (["build", "--source", src, "--out", tmp_path / "o", "--per-dataset", "-5"], "--per-dataset"),
        (["build", "--source", src, "--out", tmp_path / "o", "--history-turns", "0"], "--history-turns"),
        (["build", "--source", src, "--out", tmp_path / "o", "--eval-share", "2"], "--eval-share"),
        (["build", "--source", src, "--out", tmp_path / "afile"], "afile is an existing file"),
        (["check", tmp_path / "latin1.yaml"], "latin1.yaml: not valid UTF-8"),
        (["check", tmp_path / "adir"], "adir: is a folder, not a regular file"),
        (["run", tmp_path / "cachedir.yaml", "--no-progress"], "is a folder, not a file"),
        (["estimate", tmp_path / "temp.yaml"], "setups.0.temperature"),
        (["estimate", tmp_path / "budget.yaml"], "judges.0.max_tokens_overall"),
        (["run", tmp_path / "temp.yaml", "--processes", "0"], "--processes"),
        (["show", bench, iid, "--width", "0"], "--width"),
        (["batches", "--cache", tmp_path / "afile"], "not a call cache"),
        (["annotate-import", tmp_path / "rows.jsonl", tmp_path / "adir"], "manifest.json"),
    ]
    for argv, needle in cases:
        code, output = _invoke(*argv)
        assert code == 2 and needle in output and "Traceback" not in output, (argv, code, output)
    assert (tmp_path / "afile").read_text() == "x"  # the cache never wrote into a file of the user's


def test_an_annotation_row_that_is_not_an_object(tmp_path):
    from cocoeval.annotate.exchange import import_annotations

    (tmp_path / "rows.jsonl").write_text('{"annotator": "a", "behaviours": "none"}\n"just text"\n')
    with pytest.raises(cli.CocoevalError) as e:
        import_annotations(tmp_path / "rows.jsonl", Run.model_validate({"instances": [], "continuations": {}}))
    msg = str(e.value)
    assert "rows.jsonl: 2 rows rejected" in msg and "line 2: expected an object with the columns" in msg
    assert "got str" in msg and "nothing was imported" in msg


def test_show_makes_control_and_bidi_characters_visible(tmp_path):
    m = qmsum_meeting(120)
    for i, t in enumerate(m["meeting_transcripts"]):
        t["speaker"] = ["Eve\u202eevil", "Bob\x1b[2J", "Ann"][i % 3]
        t["content"] = f"turn {i} \x1b[31mred\x07 \u2066isolated\u2069 \x85end"
    write_json(tmp_path / "src" / "M.json", m)
    assert (
        main(["build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "b"), "--per-dataset", "1"])
        == 0
    )
    iid = json.loads((tmp_path / "b" / "eval.jsonl").read_text().split("\n")[0])["id"]
    code, shown = _invoke("show", tmp_path / "b", iid)
    assert code == 0
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
    assert "Eve\\u202eevil" in shown and "\\x1b[31mred\\x07" in shown and "\\u2066isolated" in shown
    code, shown = _invoke("show", tmp_path / "b", iid, "--json")
    assert code == 0 and not re.search(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
    data = json.loads(shown)  # still JSON, and the same data
    assert data == json.loads((tmp_path / "b" / "eval.jsonl").read_text().split("\n")[0])


def test_visible_keeps_ordinary_text():
    assert visible("Grüße, 日本語, emoji 🙂\n\ttab") == "Grüße, 日本語, emoji 🙂\n\ttab"
    assert visible("a\u200bb\U000e0041") == "a\\u200bb\\U000e0041"


@given(st.text())
def test_md_escape_adds_no_markup_and_keeps_the_text(text):
    esc = md_escape(text)
    assert "\n" not in esc and "\r" not in esc
    unescaped = re.sub(r"\\(.)", r"\1", esc)  # what a Markdown renderer shows
    expected = visible(re.sub(r"\r\n|[\n\r\t]", " ", text))
    assert unescaped == re.sub(r"\\(.)", r"\1", expected) or unescaped == expected
    assert not re.search(r"(?<!\\)[*_`<>\[\]#|$&]", re.sub(r"\\\\", "", esc))


def test_an_internal_error_is_a_message_and_the_traceback_only_on_request(monkeypatch):
    def boom(_a):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli.bench, "_cmd_fetch", boom)
    code, output = _invoke("fetch", "qmsum")
    assert code == 1 and "internal error: RuntimeError: a bug" in output and "please report" in output
    assert "Traceback" not in output
    code, output = _invoke("--debug", "fetch", "qmsum")
    assert code == 1 and "Traceback" in output
    monkeypatch.setenv("COCOEVAL_DEBUG", "1")
    code, output = _invoke("fetch", "qmsum")
    assert code == 1 and "Traceback" in output


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_tokens", 0),
        ("temperature", -0.1),
        ("temperature", 2.5),
        ("temperature", float("nan")),
        ("presence_penalty", 3.0),
        ("sample", -1),
    ],
)
def test_requests_refuse_nonsense_numbers(field, value):
    from pydantic import ValidationError

    from cocoeval.llm import GenerateRequest

    with pytest.raises(ValidationError):
        GenerateRequest(messages=[{"role": "user", "content": "hi"}], **{field: value})
