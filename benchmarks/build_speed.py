"""Build a benchmark from all of ../shared/data; print seconds and peak memory.

python benchmarks/build_speed.py [DATA_DIR]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from cocoeval import BuildConfig, build


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
    sources = []
    if (data / "qmsum").is_dir():
        sources.append(f"qmsum:{data / 'qmsum'}")
    if (data / "iq2-corpus").is_dir():
        sources.append(f"convokit:{data / 'iq2-corpus'}")
    if not sources:
        print(f"no data under {data}; nothing to measure")
        return 0
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        report = build(sources, out, BuildConfig(per_dataset=50, seed=0))
        secs = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in Path(out).iterdir())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tot = report["totals"]
    convs = sum(d["conversations"] for d in report["datasets"].values())
    print(f"sources: {', '.join(sources)}")
    print(
        f"conversations: {convs}; instances: {tot['eval_instances']} eval + "
        f"{tot['train_instances']} train; output {size / 2**20:.1f} MiB"
    )
    print(f"build seconds: {secs:.2f}")
    print(f"peak memory (max RSS): {peak_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
