"""The user-pattern battery (tests/compiler/user_patterns) through the nvFuser executor, with its
fallback to torch off, so that every translation or compilation error is a failure:

    python -m scripts.patterns_nvfuser                    # every pattern, the short schedule
    python -m scripts.patterns_nvfuser -k split qkv       # patterns whose name holds any of these
    python -m scripts.patterns_nvfuser --shard 2/8 --full # every 8th pattern from the third, whole errors

On a machine with CUDA and nvFuser the patterns run on the GPU through nvFuser itself; elsewhere
(or with `--fake`) through the CPU fake of nvfuser_direct, which checks what the translation
writes (ops, sizes, layouts, symbolic extents) but not nvFuser's own kernels. One line per failing
pattern (the first line of its error), then the count; exit status 1 if any failed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import warnings
from unittest import mock

from compiler.executors.nvfuser.executor import FALLBACK_ENV, unavailable_reason


def _patterns() -> dict[str, object]:
    from tests.compiler import user_patterns
    from tests.support.user_patterns import Pattern

    found: dict[str, object] = {}
    for module in pkgutil.iter_modules(user_patterns.__path__):
        for value in vars(importlib.import_module(f"tests.compiler.user_patterns.{module.name}")).values():
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, Pattern):
                    found[item.name] = item
    return found


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"--shard takes I/N with 0 <= I < N (such as 0/4), not {text!r}")
    return int(index), int(count)


def main(argv: list[str] | None = None) -> int:
    """Runs the selected patterns; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", nargs="+", default=[], metavar="TEXT", help="only patterns whose name holds one of these")
    parser.add_argument("--fake", action="store_true", help="the CPU fake of nvFuser even where nvFuser runs")
    parser.add_argument(
        "--shard", type=_shard, default=(0, 1), metavar="I/N", help="every Nth pattern from the Ith (0-based)"
    )
    parser.add_argument("--full", action="store_true", help="each failure's whole error, not its first line")
    args = parser.parse_args(argv)
    fake = args.fake or unavailable_reason() is not None
    settings = {FALLBACK_ENV: "0"}
    if not fake:
        settings["FUSEBENCH_PATTERNS_DEVICE"] = os.environ.get("FUSEBENCH_PATTERNS_DEVICE", "cuda")
    # NOTE: set for this run only: a caller in the same process (a test) keeps its own environment
    with mock.patch.dict(os.environ, settings):
        return _run(args, fake)


def _run(args: argparse.Namespace, fake: bool) -> int:
    """Checks the patterns `args` selects (see `main`); 0 when all pass, 1 when one fails, 2 when none is selected."""
    from scripts.compile_profile import fake_nvfuser
    from tests.support.user_patterns import check_pattern

    index, count = args.shard
    chosen = [(n, p) for n, p in sorted(_patterns().items()) if not args.k or any(k in n for k in args.k)]
    selected = dict(chosen[index::count])
    if not selected:
        print(f"no pattern's name holds any of {args.k}", file=sys.stderr)
        return 2
    where = "the CPU fake of nvFuser" if fake else "nvFuser on CUDA"
    print(f"{len(selected)} patterns through {where}", flush=True)
    failed = 0
    with fake_nvfuser() if fake else contextlib.nullcontext(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, pattern in selected.items():
            try:
                check_pattern(pattern, short=True, executors=["nvfuser", "torch"])
            except Exception as error:  # NOTE: any failure of the pattern is reported, the others go on
                failed += 1
                text = str(error) if args.full else (str(error).splitlines() or [""])[0][:240]
                print(f"FAILED {name}: {type(error).__name__}: {text}", flush=True)
    print(f"{failed} of {len(selected)} patterns failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
