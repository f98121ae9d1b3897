from __future__ import annotations

import json
import subprocess
import sys

from cocoeval.cli import main

from .conftest import qmsum_meeting, write_json


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cocoeval", *args], capture_output=True, text=True)


def test_build_is_byte_identical_and_show_prints(tmp_path, capsys):
    for i in range(4):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(150 + 10 * i))
    outs = []
    for k in ("a", "b"):
        rc = main(["build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / k),
                   "--per-dataset", "2", "--seed", "3"])
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
    write_json(tmp_path / "src" / "broken.json", {"meeting_transcripts": [{"speaker": "A", "content": "x"},
                                                                          {"speaker": None, "content": "y"}]})
    p = _run("build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "o"))
    assert p.returncode != 0
    assert "broken.json" in p.stderr and "meeting_transcripts.1.speaker" in p.stderr
    assert "Traceback" not in p.stderr
    p = _run("build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", str(tmp_path / "o"),
             "--on-error", "skip", "--per-dataset", "1")
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["sources"][0]["skipped"][0]["file"].endswith("broken.json")


def test_nothing_buildable_is_an_error(tmp_path):
    write_json(tmp_path / "short.json", qmsum_meeting(10))
    p = _run("build", "--source", f"qmsum:{tmp_path}", "--out", str(tmp_path / "o"))
    assert p.returncode == 1 and "no instance could be built" in p.stderr


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
