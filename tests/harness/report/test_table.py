"""The summary table: units, placeholders and status rows."""

from __future__ import annotations

from fusebench.measure.outcome import Outcome
from fusebench.measure.stats import summarize
from fusebench.report.table import format_bytes, format_seconds, render


def test_durations_are_printed_with_three_significant_digits() -> None:
    assert [format_seconds(s) for s in (4.75, 0.00123, 5.12e-4, 3.3e-6, 2e-8, None)] == [
        "4.75 s",
        "1.23 ms",
        "512 µs",
        "3.30 µs",
        "20.0 ns",
        "-",
    ]


def test_durations_round_into_the_next_unit_at_its_boundary() -> None:
    assert [format_seconds(s) for s in (9.999e-7, 9.9949e-7, 9.9996e-4, 99.96e-6, 9.996e-6, 0.9996)] == [
        "1.00 µs",
        "999 ns",
        "1.00 ms",
        "100 µs",
        "10.0 µs",
        "1.00 s",
    ]
    assert [format_seconds(s) for s in (999.7, 1234.4, 0.0)] == ["1000 s", "1234 s", "0.00 ns"]


def test_rows_show_numbers_or_the_status_and_group_by_case() -> None:
    base = dict(suite="s", case="gelu", params={"n": 4}, device="cpu")
    ok = Outcome(
        **base,
        variant="eager",
        status="ok",
        timing=summarize([2e-3, 1e-3, 3e-3]),
        compile_seconds=0.25,
        bytes_moved=4_000_000,
        peak_bandwidth_gbs=8.0,
    )
    unsupported = Outcome(**base, variant="fusebench", status="unsupported", detail="torch.sum is not supported")
    lines = render([ok, unsupported]).splitlines()
    assert lines[2].split() == [
        "gelu",
        "n=4",
        "eager",
        "2.00",
        "ms",
        "1.00",
        "ms",
        "2.0",
        "25.0%",
        "0.250",
        "-",
        "n/a",
        "-",
    ]
    assert lines[3].split() == ["fusebench", "unsupported:", "torch.sum", "is", "not", "supported"]
    assert lines[3].startswith(" ")  # case and params are not repeated


def test_model_cases_get_a_tokens_per_second_column() -> None:
    base = {"suite": "gpt2", "case": "gpt2_decode", "params": {"n": 8}, "device": "cpu"}
    timing = summarize([2e-3, 2e-3, 2e-3])
    model = Outcome(**base, variant="eager", status="ok", timing=timing, tokens_per_call=8)
    other = Outcome(**{**base, "case": "gelu"}, variant="eager", status="ok", timing=timing)
    assert model.tokens_per_second == 4000 and model.metric_values()["track_tokens_per_second"] == 4000
    assert other.tokens_per_second is None
    lines = render([model, other]).splitlines()
    assert lines[0].split()[-1] == "tokens/s"
    assert lines[2].split()[-1] == "4,000" and lines[3].split()[-1] == "-"
    assert "tokens/s" not in render([other])


def test_a_crashed_measurement_shows_how_its_worker_died() -> None:
    crash = "killed by SIGSEGV | last output: nvFuser: CUDA error / Fatal Python error: Segmentation fault"
    crashed = Outcome("s", "gelu", {"n": 4}, "fusebench", "cuda:0", "crashed", crash)
    lines = render([crashed]).splitlines()
    assert lines[2].split()[:4] == ["gelu", "n=4", "fusebench", "crashed:"]
    assert lines[2].endswith(crash)


def test_sizes_read_in_binary_units_with_three_digits() -> None:
    sizes = (512, 1536, 12.34 * (1 << 20), 2 << 30, 1023.9 * 1024, None)
    assert [format_bytes(b) for b in sizes] == ["512 B", "1.50 KiB", "12.3 MiB", "2.00 GiB", "1.00 MiB", "-"]


def test_peak_memory_columns_follow_where_measured() -> None:
    base = {"suite": "s", "case": "gelu", "params": {"n": 8}, "device": "cuda:0", "status": "ok"}
    timing = summarize([2e-3, 2e-3, 2e-3])
    eager = Outcome(**base, variant="eager", timing=timing, peak_device_bytes=3 << 20, peak_host_rss_bytes=1 << 30)
    ours = Outcome(**base, variant="fusebench", timing=timing, peak_device_bytes=1 << 20)
    lines = render([eager, ours]).splitlines()
    assert lines[0].split()[-4:] == ["peak", "dev", "peak", "RSS"]
    assert lines[2].split()[-4:] == ["3.00", "MiB", "1.00", "GiB"]
    assert lines[3].split()[-3:] == ["1.00", "MiB", "-"]
    assert "RSS" not in render([Outcome(**base, variant="eager", timing=timing)]).splitlines()[0]
