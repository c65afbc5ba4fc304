"""`fusebench list`: the suites, cases, parameter combinations and variants a `run` would measure."""

from __future__ import annotations

import argparse
from itertools import groupby
from typing import Any

import torch

from fusebench.cases.case import Case, format_params
from fusebench.cases.discovery import discover
from fusebench.cases.selection import (
    add_selection_arguments,
    add_shard_argument,
    plan,
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
    print(f"{len(groups)} parameter combinations on {selection.device} ({size})")
    for note in variant_notes(suites, selection):
        print(note)
    for suite, suite_groups in groupby(groups, key=lambda g: g.suite):
        print(f"\n{suite.name}  ({suite.path})")
        for case, case_groups in groupby(suite_groups, key=lambda g: g.case):
            case_groups = list(case_groups)
            summary = case.description.strip().splitlines()[0] if case.description.strip() else ""
            print(f"  {case.name}  {summary}")
            missing = case.missing_requirement()
            for group in case_groups:
                print(f"    {format_params(group.params)}  ({_bytes_note(case, group.params, missing)})")
            print(f"    variants: {', '.join(_variant_note(v, selection.device) for v in case_groups[0].variants)}")
    return 0


def _bytes_note(case: Case, params: dict[str, Any], missing: str | None) -> str:
    """'1,024 bytes moved at least'; a case whose requirement is missing is not asked (its bytes
    model may need that module: Hugging Face models count their parameters with transformers)."""
    if missing is not None:
        return f"skipped here: {missing}"
    return f"{case.bytes_moved(params):,} bytes moved at least"


def _variant_note(variant: Variant, device: torch.device) -> str:
    reason = variant.unavailable(device)
    return f"{variant.name} (skipped here: {reason})" if reason else variant.name
