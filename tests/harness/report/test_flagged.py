"""The flagged-regressions table: levels in one piece, cells that break only between parameters,
and machines as group headings rather than a column."""

from __future__ import annotations

import re

from fusebench.history.regressions import Regression
from fusebench.report.flagged import flagged_table, level
from fusebench.report.table import counted

ENV = "fusebench-cuda-py3.12-torch2.13.0"


def _regression(machine: str, metric: str, before: float, after: float, unit: str) -> Regression:
    return Regression(
        machine, ENV, "gelu_backward", "gelu_bias_backward", "shape=(4, 64, 256), dtype='float32'",
        "fusebench", metric, unit, "a" * 40, "b" * 40, before, after,
    )  # fmt: skip


SLOWER = _regression("gpu-host-1", "time_call", 120e-6, 168e-6, "seconds")
RECOMPILES = _regression("gpu-host-2", "track_recompilations", 0, 19, "recompilations")


def test_levels_name_their_unit_once() -> None:
    assert level(120e-6, 168e-6, "seconds") == "120 µs → 168 µs"
    assert level(9.9996e-4, 2e-3, "seconds") == "1.00 ms → 2.00 ms"
    assert level(0, 19, "recompilations") == "0 → 19 recompilations"


def test_one_machine_is_named_in_the_sentence_not_in_a_column() -> None:
    page = flagged_table([SLOWER], several_places=False)
    assert page.startswith(f"<p>1 step change for the worse in the histories of <b>gpu-host-1 / {ENV}</b>")
    assert "machine" not in page.split("<tbody>")[0] and 'class="place"' not in page
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert len(cells) == 7
    assert cells[1] == (
        '<span class="nowrap">shape=(4, 64, 256)</span>, <span class="nowrap">dtype=&#x27;float32&#x27;</span>'
    )
    assert cells[4] == '<span class="nowrap">120 µs → 168 µs</span>' and cells[5] == '<span class="bad">+40.0%</span>'
    assert cells[6] == f'<span class="nowrap"><code>{"a" * 8}..{"b" * 8}</code></span>'


def test_several_machines_group_the_rows_under_full_width_headings() -> None:
    second_on_first = _regression("gpu-host-1", "track_kernels", 1, 3, "kernels")
    page = flagged_table([SLOWER, RECOMPILES, second_on_first], several_places=True)
    assert page.startswith("<p>3 step changes for the worse in the histories, worst first.</p>")
    headings = re.findall(r'<tr class="place"><th colspan="7">([^<]+)</th></tr>', page)
    assert headings == [f"gpu-host-1 / {ENV}", f"gpu-host-2 / {ENV}"]
    body = page.split("<tbody>")[1]
    order = [metric for metric in re.findall(r"<td>(time_call|track_\w+)</td>", body)]
    assert order == ["time_call", "track_kernels", "track_recompilations"]  # each machine's rows stay together
    assert body.index("gpu-host-2") < body.index("track_recompilations")
    # One machine among several on the page still gets its heading (the page has a selector).
    assert 'class="place"' in flagged_table([SLOWER], several_places=True)


def test_counts_agree_with_their_noun() -> None:
    assert [counted(1, "commit"), counted(8, "commit"), counted(0, "case")] == ["1 commit", "8 commits", "0 cases"]
    assert counted(1, "series", "series") == "1 series" and counted(3, "series", "series") == "3 series"
