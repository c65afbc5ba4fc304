"""Which cases, parameter combinations and variants a command runs (flags shared by `run` and `compare`).

--suite NAME        only these suites (repeatable)
-k PATTERN          only cases whose id 'suite.case(params)' contains PATTERN, or matches it as a
                    shell glob when it has * ? or [ (case-insensitive; repeatable: any may match)
--variant NAME      only these variants (names or globs; repeatable, or comma-separated)
--all               every parameter combination and every variant. Without it (and without -k or
                    --variant) a run measures each case's headline: the combinations of
                    `Case.headline_grid` with the variants of `default_variants_for` (eager,
                    torch.compile, fusebench, thunder and the case's own), what a developer
                    compares on every change. -k picks from every combination, --variant from
                    every variant: an explicit selection is never narrowed to the headline
--quick / --full    small sizes that run on CPU / GPU sizes; the default is quick on CPU, full on CUDA
--device cpu|cuda   default: cuda when available
--suites DIR        discover suites in DIR instead of the bundled `suites` package (repeatable)
--shard I/N         (run, list) only the I-th of N shares of the (case, params) selected: the
                    case ids in sorted order, dealt out in turn, so every machine of a CI matrix
                    or fleet given the same flags and code runs a disjoint share, and together
                    they run all of it
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from fusebench.cases.case import Case, default_variants_for, format_params, variants_for
from fusebench.cases.discovery import Suite
from fusebench.cases.variants import Variant
from fusebench.errors import FusebenchError, check


@dataclass(frozen=True)
class Selection:
    """The resolved selection flags."""

    suites: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    quick: bool = True
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    suite_dirs: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None  # (index from 1, count) of `--shard I/N`
    everything: bool = False  # `--all`: every combination and variant, not each case's headline
    # exactly these (case id, variant) pairs among what the flags select (PAIRS_ENV); None: all
    pairs: frozenset[tuple[str, str]] | None = None


@dataclass(frozen=True)
class Group:
    """One parameter combination of one case, and the variants to measure on it."""

    suite: Suite
    case: Case
    params: dict[str, Any]
    variants: tuple[Variant, ...]

    @property
    def case_id(self) -> str:
        """'suite.case(name=value, ...)', what -k matches."""
        return case_id(self.suite.name, self.case.name, self.params)


# NOTE: `fusebench compare`'s follow-up rounds measure (case, variant) pairs, which flags cannot
# name (every case selected runs with every variant selected). An environment variable, not a
# flag: a revision older than it ignores it and measures what its flags select, of which compare
# keeps the pairs it asked for.
PAIRS_ENV = "FUSEBENCH_RUN_PAIRS"


def pairs_from_environment(environ: dict[str, str] | None = None) -> frozenset[tuple[str, str]] | None:
    """The (case id, variant) pairs PAIRS_ENV names (a JSON list of [case id, variant]), or None when unset."""
    text = (os.environ if environ is None else environ).get(PAIRS_ENV)
    if text is None:
        return None
    try:
        pairs = json.loads(text)
        return frozenset((str(case), str(variant)) for case, variant in pairs)
    except (ValueError, TypeError) as error:
        raise FusebenchError(f"{PAIRS_ENV}: expected a JSON list of [case id, variant] pairs ({error})") from error


def pairs_value(pairs: list[tuple[str, str]]) -> str:
    """PAIRS_ENV's value for `pairs`."""
    return json.dumps(sorted(set(pairs)))


def case_id(suite: str, case: str, params: dict[str, Any]) -> str:
    """'suite.case(name=value, ...)'."""
    return f"{suite}.{case}({format_params(params)})"


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the selection flags to a subcommand's parser."""
    parser.add_argument("--suite", action="append", default=[], metavar="NAME", help="only this suite (repeatable)")
    parser.add_argument(
        "-k", dest="patterns", action="append", default=[], metavar="PATTERN", help="only cases whose id matches"
    )
    parser.add_argument(
        "--variant", action="append", default=[], metavar="NAME", help="only these variants (names or globs)"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", default=None, help="small sizes (default on CPU)")
    size.add_argument("--full", dest="quick", action="store_false", help="GPU sizes (default on CUDA)")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available, else cpu")
    parser.add_argument(
        "--all",
        dest="everything",
        action="store_true",
        help="every parameter combination and variant (default: each case's headline combinations with "
        "the default variants; -k and --variant select from everything)",
    )
    parser.add_argument(
        "--suites", dest="suite_dirs", action="append", default=[], metavar="DIR", help="discover suites in DIR"
    )


def add_shard_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--shard I/N` (run and list)."""
    parser.add_argument(
        "--shard",
        type=parse_shard,
        metavar="I/N",
        help="only the I-th of N disjoint shares of the selected (case, params), e.g. 2/3 (for CI matrices and fleets)",
    )


def parse_shard(text: str) -> tuple[int, int]:
    """'2/3' -> (2, 3); anything but I/N with 1 <= I <= N is an argparse error naming the flag."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N with 1 <= I <= N, like 1/3")
    return int(match.group(1)), int(match.group(2))


def selection_from_args(args: argparse.Namespace) -> Selection:
    """Resolves defaults: the device (cuda when available) and the size (quick unless on CUDA)."""
    device_name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    check(
        device_name != "cuda" or torch.cuda.is_available(),
        lambda: "--device cuda: torch.cuda.is_available() is False on this machine (a CPU build of torch?)",
    )
    quick = args.quick if args.quick is not None else device_name == "cpu"
    variants = tuple(name.strip() for value in args.variant for name in value.split(",") if name.strip())
    return Selection(
        suites=tuple(args.suite),
        patterns=tuple(args.patterns),
        variants=variants,
        quick=quick,
        device=torch.device(device_name),
        suite_dirs=tuple(args.suite_dirs),
        shard=getattr(args, "shard", None),
        everything=bool(getattr(args, "everything", False)),
    )


def plan(suites: list[Suite], selection: Selection) -> list[Group]:
    """The groups to measure, in suite, case and grid order: each case's headline combinations and
    default variants, or with `--all` (`everything`) all of them; -k patterns match among every
    combination and --variant names among every variant; `Selection.pairs` keeps only those
    (case id, variant) pairs of what is selected. Unknown suite names are errors, and so
    is a variant name that matches no variant of any selected suite (one that only some suites
    have is measured where it exists: `variant_notes` says where not)."""
    known_suites = [s.name for s in suites]
    for name in selection.suites:
        check(name in known_suites, lambda name=name: f"--suite {name}: no such suite; known suites: {known_suites}")
    chosen = [s for s in suites if not selection.suites or s.name in selection.suites]
    all_variants = sorted({v.name for s in chosen for c in s.cases for v in variants_for(c)})
    for pattern in selection.variants:
        check(
            any(_variant_matches(pattern, name) for name in all_variants),
            lambda pattern=pattern: f"--variant {pattern}: matches no variant; known variants: {all_variants}",
        )
    every_combination = selection.everything or bool(selection.patterns)
    groups = []
    for suite in chosen:
        for case in suite.cases:
            variants = selected_variants(case, selection.variants, selection.everything)
            grid = case.grid(selection.quick) if every_combination else case.headline_grid(selection.quick)
            for params in grid:
                group = Group(suite, case, params, variants)
                if selection.pairs is not None:
                    chosen_here = tuple(v for v in variants if (group.case_id, v.name) in selection.pairs)
                    group = Group(suite, case, params, chosen_here)
                if group.variants and _id_matches(selection.patterns, group.case_id):
                    groups.append(group)
    return shard_of(groups, selection.shard)


def selected_variants(case: Case, patterns: tuple[str, ...], everything: bool) -> tuple[Variant, ...]:
    """The variants of `case` to measure: those `patterns` name (names or globs, among all of its
    variants), else all of them with `everything`, else its default ones."""
    if patterns:
        return tuple(v for v in variants_for(case) if any(_variant_matches(p, v.name) for p in patterns))
    return tuple(variants_for(case) if everything else default_variants_for(case))


def plan_size(groups: list[Group]) -> int:
    """Measurements in `groups`: one per (group, variant)."""
    return sum(len(group.variants) for group in groups)


def shard_of(groups: list[Group], shard: tuple[int, int] | None) -> list[Group]:
    """The groups of shard (I, N): sorted by case id, the I-th of every N, in the plan's order.
    Sorting by the ids, not by Python's `hash` (salted per process), makes the shares the same on
    every machine; dealing them out in turn spreads each suite's cases over the shards."""
    if shard is None:
        return groups
    index, count = shard
    ids = sorted({group.case_id for group in groups})
    mine = {case for position, case in enumerate(ids) if position % count == index - 1}
    return [group for group in groups if group.case_id in mine]


def variant_notes(suites: list[Suite], selection: Selection) -> list[str]:
    """One line per `--variant` name that some selected suites lack ('--variant X: not in suites a,
    b; measured where it exists'); `plan` rejects a name no selected suite has."""
    chosen = [s for s in suites if not selection.suites or s.name in selection.suites]
    notes = []
    for pattern in selection.variants:
        lacking = [
            suite.name
            for suite in chosen
            if not any(_variant_matches(pattern, v.name) for case in suite.cases for v in variants_for(case))
        ]
        if lacking:
            notes.append(
                f"--variant {pattern}: not in suite{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}; "
                "measured where it exists"
            )
    return notes


def _variant_matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) if _is_glob(pattern) else pattern == name


def _id_matches(patterns: tuple[str, ...], identifier: str) -> bool:
    if not patterns:
        return True
    lowered = identifier.lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) if _is_glob(p) else p.lower() in lowered for p in patterns)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")
