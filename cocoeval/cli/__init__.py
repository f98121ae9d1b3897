"""The ``cocoeval`` command line: ``main`` and ``build_parser`` assemble one module per command
group: ``bench`` (build, show, demo-data, fetch), ``run`` (run, estimate, check, batches), ``sft``
(sft-export, finetune), ``annotate`` (annotate-export/-import), ``annotate_next`` (annotate-next),
``report`` (report, notebooks),
``simulators`` (export-instances, import-continuations, simulators), ``probe`` (probe), ``compare``
(compare), ``export`` (export).
Option converters live in ``_args``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from cocoeval import __version__
from cocoeval.core.errors import CocoevalError

from . import annotate, annotate_next, bench, compare, export, probe, report, run, sft, simulators


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cocoeval",
        description="CoCoEval workbench: build benchmarks from human conversations, simulate, judge and analyse.",
    )
    p.add_argument("--version", action="version", version=f"cocoeval {__version__}")
    p.add_argument(
        "--debug", action="store_true", help="print the traceback of an internal error (also COCOEVAL_DEBUG=1)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    for group in (bench, sft, annotate, annotate_next, report, export, run, simulators, probe, compare):
        group.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log = logging.getLogger("cocoeval")
    if not log.handlers:  # batch submissions and their ends, on stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        return int(args.func(args) or 0)
    except CocoevalError as e:
        from cocoeval.llm.secrets import (
            redact,  # a provider may have echoed the key in its error text
        )

        print(f"error: {redact(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt as e:  # Ctrl-C: one line (an Interrupted says what was kept), never a traceback
        print(f"interrupted: {e}" if str(e) else "interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as e:  # defence in depth: a bug still ends with a message, not a bare traceback
        from cocoeval.llm.secrets import redact

        if getattr(args, "debug", False) or os.environ.get("COCOEVAL_DEBUG") == "1":
            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(
            redact(
                f"internal error: {type(e).__name__}: {e}\n  please report it with the command line "
                "(rerun with --debug or COCOEVAL_DEBUG=1 for the traceback)"
            ),
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["build_parser", "main"]
