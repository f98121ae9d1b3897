"""``cocoeval export RUN --format inspect``: a run as Inspect AI eval logs that the real
``inspect_ai`` reads back, each sample's scores those of the run's frames; ``--format eee`` says
why cocoeval writes no Every Eval Ever records and how to get them."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from cocoeval.analysis.frames import open_run_dir, run_frames
from cocoeval.cli import main

inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect-ai is not installed (the interop extra)")


def _params(tmp: Path, url: str) -> Path:
    """Four QMSum-shaped meetings, one setup and one judge (both kinds, one attempt) on the fake server."""
    from cocoeval import build

    from ..conftest import qmsum_meeting, write_json

    for i in range(4):
        write_json(tmp / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    build([f"qmsum:{tmp / 'src'}"], tmp / "bench")
    model = f"openai-compatible/fake@{url}"
    p = tmp / "exp.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "exp",
                "out": "runs/exp",
                "bench": "bench",
                "setups": [{"name": "s", "model": model, "turns_per_call": 30}],
                "judges": [{"name": "j", "model": model, "max_attempts": 1}],
                "llm": {"cache": "cache.sqlite", "concurrency": 1},
            }
        )
    )
    return p


def _answers() -> list[dict]:
    speakers = ["Project Manager", "Marketing", "User Interface"]
    fine = {
        "turns": [
            {"turn": i, "behaviours": [{"behaviour": "Repetition", "evidence": "again"}] if i % 4 == 0 else []}
            for i in range(1, 31)
        ]
    }
    return [
        {"match": "Continuation to annotate", "text": json.dumps(fine)},
        # the first overall answer is out of range (invalid: one attempt), the others valid
        {"match": "Continuation to evaluate", "text": '{"consistency": 12, "collaborativeness": 5}', "times": 1},
        {"match": "Continuation to evaluate", "text": '{"consistency": 6, "collaborativeness": 4, "rationale": "x"}'},
        {"match": "", "text": "\n".join(f"{speakers[i % 3]}: point number {i}" for i in range(30))},
    ]


@pytest.fixture(scope="module")
def exported(server, tmp_path_factory) -> tuple[Path, Path, str]:
    """A run made through ``cocoeval run`` on the fake server, then the documented command:
    ``cocoeval export runs/exp --format inspect --out inspect-logs``."""
    from ..conftest import TEST_KEY

    tmp = tmp_path_factory.mktemp("inspect")
    with pytest.MonkeyPatch.context() as mp:
        server.reset()
        server.configure(answers=_answers())
        mp.setenv("OPENAI_API_KEY", TEST_KEY)
        mp.chdir(tmp)
        buf = io.StringIO()
        with redirect_stdout(buf):
            assert main(["run", str(_params(tmp, server.openai_base)), "--no-progress"]) == 3  # one invalid judgment
            start = len(buf.getvalue())
            assert main(["export", "runs/exp", "--format", "inspect", "--out", "inspect-logs"]) == 0
    return tmp / "runs" / "exp", tmp / "inspect-logs", buf.getvalue()[start:]


def test_the_documented_command_writes_one_log_per_target_and_judge_that_inspect_reads_back(exported):
    run_dir, out, printed = exported
    files = sorted(p.name for p in out.iterdir())
    assert files == ["human-reference__j.eval", "s__j.eval"]
    assert "beyond the paper" in printed and "inspect view --log-dir inspect-logs" in printed
    f = run_frames(open_run_dir(run_dir))
    seen_invalid = 0
    for name, target in (("human-reference__j.eval", "reference"), ("s__j.eval", "s")):
        log = inspect_log.read_eval_log(str(out / name))
        assert log.status == "success" and log.samples is not None
        assert log.eval.metadata["note"].startswith("beyond the paper")
        expected = f.instances if target == "reference" else f.continuations.filter(f.continuations["setup"] == target)
        assert len(log.samples) == expected.height > 0
        counts = f.counts.filter((f.counts["target"] == target) & (f.counts["judge"] == "j"))
        likert = f.likert.filter((f.likert["target"] == target) & (f.likert["judge"] == "j"))
        for s in log.samples:
            mine = counts.filter(counts["instance_id"] == s.id)
            got = {k: v.value for k, v in (s.scores or {}).items()}
            assert {r["behaviour"]: r["count"] for r in mine.iter_rows(named=True)} == {
                k: v for k, v in got.items() if k not in ("consistency", "collaborativeness")
            }
            lk = likert.filter(likert["instance_id"] == s.id)
            if lk.height:
                assert got["consistency"] == lk["consistency"][0]
                assert got["collaborativeness"] == lk["collaborativeness"][0]
            else:
                assert "consistency" not in got
        invalid = [s for s in log.samples if s.metadata["judgments"]["overall"].startswith("invalid: ")]
        assert all("consistency" not in (s.scores or {}) for s in invalid)
        seen_invalid += len(invalid)
        # the results: each score's mean over the samples that have it, checked against the frames
        for sc in log.results.scores:
            if sc.name in ("consistency", "collaborativeness"):
                want = likert[sc.name].mean()
            else:
                want = counts.filter(counts["behaviour"] == sc.name)["count"].mean()
            assert math.isclose(sc.metrics["mean"].value, want)
    assert seen_invalid == 1  # the one invalid overall judgment: no Likert score, its reason instead


def test_no_written_log_holds_the_run_s_absolute_path(exported):
    run_dir, out, printed = exported
    import zipfile

    root = str(run_dir.parent.parent)
    for p in out.iterdir():
        with zipfile.ZipFile(p) as z:
            for n in z.namelist():
                assert root not in z.read(n).decode("utf-8"), (p.name, n)
    assert root not in printed


def test_eee_says_why_no_records_are_written_and_how_to_convert_the_inspect_logs(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--format", "eee", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Python >= 3.12" in err and "every_eval_ever convert inspect" in err


@pytest.mark.slow
def test_inspect_view_lists_the_logs_and_serves_their_headers(exported):
    """``inspect view`` (Inspect's own viewer, a web server on the loopback) lists both logs and
    serves each one's header: the logs open there as Inspect's own do."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.parse
    import urllib.request

    _, out, _ = exported
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inspect = Path(sys.executable).parent / "inspect"
    proc = subprocess.Popen(
        [str(inspect), "view", "--log-dir", str(out), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base, listed = f"http://127.0.0.1:{port}", None
        for _ in range(120):
            try:
                with urllib.request.urlopen(base + "/api/logs", timeout=2) as r:
                    listed = json.loads(r.read())
                break
            except OSError:
                time.sleep(0.5)
        assert listed is not None, "inspect view did not answer"
        names = sorted(Path(urllib.parse.urlparse(f["name"]).path).name for f in listed["files"])
        assert names == ["human-reference__j.eval", "s__j.eval"]
        uri = (out / "s__j.eval").resolve().as_uri()
        with urllib.request.urlopen(base + "/api/log-headers?file=" + urllib.parse.quote(uri), timeout=10) as r:
            [header] = json.loads(r.read())
        assert header["status"] == "success" and header["eval"]["task_display_name"] == "s judged by j"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_setup_named_like_the_reference_s_log_is_refused_rather_than_overwriting_it(
    server, tmp_path, monkeypatch, capsys
):
    from ..conftest import TEST_KEY

    server.reset()
    server.configure(answers=_answers())
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.chdir(tmp_path)
    p = _params(tmp_path, server.openai_base)
    p.write_text(p.read_text().replace("name: s\n", "name: human-reference\n"))
    assert main(["run", str(p), "--no-progress"]) == 3
    capsys.readouterr()
    assert main(["export", "runs/exp", "--format", "inspect", "--out", "logs"]) == 2
    err = capsys.readouterr().err
    assert (
        "would be written to one file" in err and "human-reference__j.eval" in err and "rename one of the setups" in err
    )
