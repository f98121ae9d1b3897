"""Every file cocoeval writes follows the umask (mode 0666 & ~umask, as ``open()`` makes a file):
a collaborator of the same group can open the report, the run's files, the benchmark and the
dataset card as the umask allows, never a 0600 file that only the writer can read."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
import yaml

from ..conftest import qmsum_meeting, write_json


def _cocoeval(umask: int, *args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cocoeval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=lambda: os.umask(umask),
    )


def _modes(folder) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
        for p in folder.rglob("*")
        if p.is_file() and ".cache" not in p.parts
    }


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_every_file_a_build_a_run_a_report_and_an_export_write_follows_the_umask(srv, tmp_path, umask):
    speakers = ["Project Manager", "Marketing", "User Interface"]
    overall = '{"consistency": 7, "collaborativeness": 5, "rationale": "fine"}'
    srv.configure(
        answers=[
            {"match": "Continuation to evaluate", "text": overall},
            {"match": "", "text": "\n".join(f"{speakers[i % 3]}: point {i}" for i in range(30))},
        ]
    )
    for i in range(6):
        write_json(tmp_path / "src" / "product" / f"M{i}.json", qmsum_meeting(80 + i))
    model = f"openai-compatible/fake@{srv.openai_base}"
    (tmp_path / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "out": "run",
                "bench": "bench",
                "instances": {"per_dataset": 1},
                "setups": [{"name": "s", "model": model, "turns_per_call": 30}],
                "judges": [{"name": "j", "model": model, "kind": ["overall"], "max_attempts": 1}],
                "llm": {"cache": "cache.sqlite", "concurrency": 2},
            }
        )
    )
    for args in (
        ("build", "--source", f"qmsum:{tmp_path / 'src'}", "--out", "bench"),
        ("bench-export", "bench", "--out", "export"),
        ("run", "p.yaml", "--no-progress"),
        ("report", "run", "--out", "report", "--html", "--resamples", "20"),
    ):
        out = _cocoeval(umask, *args, cwd=tmp_path)
        assert out.returncode == 0, (args, out.stderr)
    modes = (
        _modes(tmp_path / "bench")
        | {f"export/{k}": v for k, v in _modes(tmp_path / "export").items()}
        | {f"run/{k}": v for k, v in _modes(tmp_path / "run").items()}
        | {f"report/{k}": v for k, v in _modes(tmp_path / "report").items()}
    )
    for name in (
        "eval.jsonl",
        "export/README.md",
        "export/eval.parquet",
        "run/manifest.json",
        "run/instances.jsonl",
        "run/continuations/s.jsonl",
        "run/judgments/j.jsonl",
        "run/usage.json",
        "report/index.md",
        "report/index.html",
    ):
        assert name in modes, name
    assert any(n.endswith(".png") for n in modes) and any(n.endswith(".csv") for n in modes)
    wrong = {n: oct(m) for n, m in modes.items() if m != 0o666 & ~umask}
    assert not wrong, f"not {oct(0o666 & ~umask)}: {wrong}"
