"""What each speed trick saves: every trick of ``cocoeval.core.speed`` and ``cocoeval.analysis.speed``
timed on and off (``COCOEVAL_SPEED_OFF=<name>``) on a run of the paper's shape, in fresh processes,
with and without alternating round by round, and the median saving printed per trick (the rule:
a trick that saves under a second goes).

Workloads, each what a user waits for where the trick acts:

- ``blas``: ``cocoeval report`` as ``cocoeval run`` leaves the run (its frames kept,
  the report computed: no report kept);
- ``report``: the same report asked for again (the kept copy), against computing it;
- ``iri``: a process importing the analysis and Altair (what every report, analysis and
  notebook kernel does first).

    python benchmarks/speed_tricks.py [--run DIR] [--rounds 3] [--only blas,report,...]

``--run``: a paper-shaped run written before (``benchmarks/paper_scale.py --out DIR --keep``
writes one in ``DIR/run``; default: one written into a temporary folder, about 1.5 minutes)."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paper_scale import drop_kept_reports, loop_seconds, timed, write_paper_run  # noqa: E402

from cocoeval.core.speed import TRICKS  # noqa: E402

EXE = str(Path(sys.executable).parent / "cocoeval")


def run_cmd(cmd: list[str], off: str) -> tuple[float, float]:
    """Wall and CPU seconds (the process tree's user + system) of ``cmd`` in a fresh process with
    ``COCOEVAL_SPEED_OFF=off``."""
    env = {**os.environ, "COCOEVAL_SPEED_OFF": off}
    s, _, cpu, p = timed(cmd, cwd=ROOT, env=env)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode})")
    return s, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="a paper-shaped run directory written before")
    ap.add_argument("--rounds", type=int, default=3, help="times each variant runs (alternating)")
    ap.add_argument("--only", default=",".join(TRICKS), help="the tricks to time, comma-separated")
    a = ap.parse_args()
    only = [t for t in a.only.split(",") if t]
    tmp = Path(tempfile.mkdtemp(prefix="cocoeval-speed-tricks-"))
    try:
        d = a.run
        if d is None:
            d = tmp / "run"
            write_paper_run(d)
        import subprocess

        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cocoeval")], check=True)
        print(
            f"this machine: {os.cpu_count()} cores, a 10^7-step Python loop in {loop_seconds():.2f} s, "
            f"load average {os.getloadavg()[0]:.1f}; run {d}"
        )
        report = [EXE, "report", str(d), "--out", str(tmp / "report")]
        keep_frames = [
            sys.executable,
            "-c",
            "import sys; from cocoeval.analysis.frames import keep_frames; keep_frames(sys.argv[1])",
            str(d),
        ]
        imports = [sys.executable, "-c", "import cocoeval.analysis, altair"]

        # groups timed round by round: {variant: (command, COCOEVAL_SPEED_OFF)} and, per trick, the
        # variants with it and without it
        groups: list[tuple[dict[str, tuple[list[str], str]], list[tuple[str, str, str, str]]]] = [
            (
                {
                    "report computed": (report, "report"),
                    "report copied": (report, ""),
                    "report, blas off": (report, "report,blas"),
                },
                [
                    ("blas", "cocoeval report, frames kept, computed", "report computed", "report, blas off"),
                    ("report", "cocoeval report asked again", "report copied", "report computed"),
                ],
            ),
            (
                {"imports": (imports, ""), "imports, iri off": (imports, "iri")},
                [("iri", "import cocoeval.analysis, altair", "imports", "imports, iri off")],
            ),
        ]
        if not any((d / "cache").glob("frames-*")):
            run_cmd(keep_frames, "")  # as cocoeval run leaves the run
        for variants, savings in groups:
            savings = [x for x in savings if x[0] in only]
            if not savings:
                continue
            names = list(dict.fromkeys(v for x in savings for v in x[2:]))
            if "report copied" in names:  # the report kept once, then copied in each round
                drop_kept_reports(d)
                run_cmd(report, "")
            times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
            for _ in range(a.rounds):  # with and without, alternating
                for n in names:
                    times[n].append(run_cmd(*variants[n]))
            for trick, what, on, off in savings:
                (w_on, c_on), (w_off, c_off) = median(times[on]), median(times[off])
                paired = statistics.median(b[0] - a[0] for a, b in zip(times[on], times[off], strict=True))
                print(
                    f"{trick:7} {what}: {w_on:.1f} s with it, {w_off:.1f} s without -> saves {w_off - w_on:.1f} s "
                    f"of wall time (round by round: {paired:.1f} s), {c_off - c_on:.1f} s of CPU (with: "
                    f"{fmt(times[on])}; without: {fmt(times[off])}; wall/CPU)",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def median(xs: list[tuple[float, float]]) -> tuple[float, float]:
    """The medians of the wall and of the CPU seconds."""
    return statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)


def fmt(xs: list[tuple[float, float]]) -> str:
    return ", ".join(f"{w:.1f}/{c:.1f}" for w, c in xs)


if __name__ == "__main__":
    main()
