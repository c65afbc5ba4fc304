"""`fusebench list`: the suites, cases, parameter combinations and variants a `run` would measure.

Without `--all` it lists the default run (each case's headline combinations and default variants)
and, per case, the variants only `--all` or `--variant` measure; with `--all` (or -k, --variant,
which select from everything) it marks what a default run leaves out with `[--all]`."""

from __future__ import annotations

import argparse
import dataclasses
from itertools import groupby
from typing import Any

import torch

from fusebench.cases.case import Case, default_variants_for, format_params, variants_for
from fusebench.cases.discovery import discover
from fusebench.cases.selection import (
    Selection,
    add_selection_arguments,
    add_shard_argument,
    plan,
    plan_size,
    selection_from_args,
    variant_notes,
)
from fusebench.cases.variants import Variant
from fusebench.errors import check


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Registers `list`."""
    parser = subparsers.add_parser("list", help="list suites, cases, parameters and variants")
    add_selection_arguments(parser)
    add_shard_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Prints what the selection flags select, and which variants cannot run on this machine."""
    selection = selection_from_args(args)
    suites = discover(selection.suite_dirs)
    groups = plan(suites, selection)
    check(groups, lambda: "the selection flags selected nothing (check -k, --suite and --variant)")
    size = "quick sizes" if selection.quick else "full sizes"
    print(
        f"{len(groups)} parameter combinations, {plan_size(groups)} measurements on {selection.device} ({size})"
        f"{_scope(suites, selection, groups)}"
    )
    for note in variant_notes(suites, selection):
        print(note)
    for suite, suite_groups in groupby(groups, key=lambda g: g.suite):
        print(f"\n{suite.name}  ({suite.path})")
        for case, case_groups in groupby(suite_groups, key=lambda g: g.case):
            case_groups = list(case_groups)
            summary = case.description.strip().splitlines()[0] if case.description.strip() else ""
            print(f"  {case.name}  {summary}")
            missing = case.missing_requirement()
            headline = case.headline_grid(selection.quick)
            for group in case_groups:
                sweep = "  [--all]" if group.params not in headline else ""  # -k lists them too
                print(f"    {format_params(group.params)}  ({_bytes_note(case, group.params, missing)}){sweep}")
            defaults = default_variants_for(case)
            listed = case_groups[0].variants
            notes = [_variant_note(v, selection.device) + ("" if v in defaults else " [--all]") for v in listed]
            print(f"    variants: {', '.join(notes)}")
            opt_in = [v.name for v in variants_for(case) if v not in listed and v not in defaults]
            if opt_in and not selection.variants:
                print(f"    with --all or --variant also: {', '.join(opt_in)}")
    return 0


def _scope(suites: list, selection: Selection, groups: list) -> str:
    """'; each case's headline (--all: 44 more combinations, 843 more measurements)', or '' with --all."""
    if selection.everything:
        return "; everything (--all): [--all] marks what a default run leaves out"
    every = plan(suites, dataclasses.replace(selection, everything=True))
    more_groups, more_units = len(every) - len(groups), plan_size(every) - plan_size(groups)
    if more_units <= 0:
        return ""
    return f"; each case's headline (--all: {more_groups} more combinations, {more_units} more measurements)"


def _bytes_note(case: Case, params: dict[str, Any], missing: str | None) -> str:
    """'1,024 bytes moved at least'; a case whose requirement is missing is not asked (its bytes
    model may need that module: Hugging Face models count their parameters with transformers)."""
    if missing is not None:
        return f"skipped here: {missing}"
    return f"{case.bytes_moved(params):,} bytes moved at least"


def _variant_note(variant: Variant, device: torch.device) -> str:
    reason = variant.unavailable(device)
    return f"{variant.name} (skipped here: {reason})" if reason else variant.name
