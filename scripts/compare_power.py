"""The power of `fusebench compare`: how often it flags a real slowdown, and how often nothing.

    python -m scripts.compare_power --device cpu --tries 20
    python -m scripts.compare_power --device cuda --kinds AB --tries 1 --replicas 10 --effects 1.05 \
        --extra-prims 0 --variants eager

It builds a throwaway git repository from this checkout (compiler, fusebench, suites) with one more
suite, `power_study`: an elementwise chain of `reps` multiply-adds per call (`grow_<percent>` and
`steady`), and `adds`, a chain of tensor adds (left out with `--extra-prims 0`). Then two commits
on top, as a developer would make:
- A: the suite as written;
- B: each `grow_<percent>` case does percent / 100 times the work (its `reps` multiplied) and the
  compiler's `torch.add` decomposition multiplies its first operand by 1.0 `--extra-prims` times
  before adding (k extra prims per add: the `fusebench-torch` variant of `adds`, which runs each
  prim as its own torch call, gets slower; eager does not, and executors that fuse (Inductor,
  nvFuser: `fusebench`) fold or fuse the multiplies, so their row's true effect reads `fused`,
  counted neither as a detection nor as unchanged). `steady` is untouched.
It then runs `--tries` comparisons A against A (nothing changed: every flag is a false positive)
and `--tries` comparisons A against B with this checkout's `fusebench compare`, and prints per row
how often each verdict came, the detection rate per effect and the false-positive rates. Exit 0.

On one GPU for a few minutes (`--budget`, an ETA after every round, the progress in `--log`):

    python -m scripts.compare_power --device cuda --kinds AB --tries 1 --replicas 20 --effects 1.05 \
        --extra-prims 0 --variants eager --compare-args=--no-segments --budget 450 --log power_gpu.log

one comparison A against B whose 20 `grow_105` rows are the A/B trials and whose 20 `steady` rows,
the same code on both sides, the A/A ones (`unchanged rows flagged in A/B comparisons`); eager
runs no fusion, so the first round has no nvFuser kernels to profile (`--no-segments`). Flags of
compare that start with dashes go as `--compare-args=...`.

`--replicas R` declares every case R times (`steady_r0`, `steady_r1`, ...): one comparison then
holds R trials of each effect, where a fresh process per trial costs too much (a GPU host's CUDA
start-up per round). Replicas share their rounds, so a drift of the machine that pairing does not
cancel hits them together: comparisons (`--tries`) are the independent trials, replicas the cheap
ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from fusebench.compare.arguments import DEFAULT_ROUNDS
from fusebench.measure.outcome import TIME
from scripts.power_progress import StudyClock, format_duration, open_log, run_comparison

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("slower", "faster")
BASE_REPS = 20
SIZES = {"cpu": 65536, "cuda": 16 * 1024 * 1024}
ADD_LINE = "        return elementwise(prims.add, input, other)\n"
MIN_BUDGET_S, MAX_BUDGET_S = 10.0, 7 * 24 * 3600.0
MAX_NUMEL = 2**31 - 1
MAX_REPLICAS = 100
MAX_TRIES = 1000

SUITE = '''"""The power study's cases (scripts/compare_power.py): elementwise chains whose work is set by `reps`."""

import torch

from fusebench.cases import Case

REPS = {reps}


def chain(x: torch.Tensor, reps: int) -> torch.Tensor:
    for _ in range(reps):
        x = x * 1.0001 + 0.5
    return x


def adds(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for _ in range(10):
        x = x + y
    return x


def _inputs(params, device, seed):
    generator = torch.Generator(device).manual_seed(seed)  # made where measured: no host copy per case
    x = torch.rand(params["numel"], generator=generator, device=device)
    return (x, x.flip(0).contiguous())


def _case(name, fn):
    return Case(
        name=name,
        fn=fn,
        make_inputs=_inputs,
        bytes_moved=lambda params: 8 * params["numel"],
        params={{"numel": [{numel}]}},
        tolerances={{torch.float32: (1e-4, 1e-4)}},
    )


def _grown(name):
    return lambda x, y: chain(x, REPS[name])


def _named(name, replica):
    return name if {replicas} == 1 else f"{{name}}_r{{replica}}"


CASES = [
    case
    for replica in range({replicas})
    for case in [_case(_named(name, replica), _grown(name)) for name in REPS]
    + ([_case(_named("adds", replica), adds)] if {with_adds} else [])
]
'''


def main(argv: list[str] | None = None) -> int:
    """Builds the history, runs the comparisons, prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--tries", type=int, default=20, help="comparisons of each kind (A/A and A/B)")
    parser.add_argument("--effects", default="1.5,1.2,1.1", help="work factors of B's grow cases")
    parser.add_argument("--extra-prims", type=int, default=2, help="extra mul prims per add in B's compiler")
    parser.add_argument("--replicas", type=int, default=1, help="copies of each case in one comparison")
    parser.add_argument("--kinds", default="AA,AB", help="which comparisons: AA (A against A), AB, or both")
    parser.add_argument("--variants", default="eager,fusebench,fusebench-torch", help="variants compared")
    parser.add_argument("--compare-args", default="", help="more `fusebench compare` flags, e.g. '--rounds 4'")
    parser.add_argument("--keep", type=Path, help="keep each comparison's JSON in this folder")
    parser.add_argument(
        "--decide-again",
        type=Path,
        metavar="DIR",
        help="measure nothing: decide the samples kept in DIR (by --keep) again with this checkout's rule",
    )
    parser.add_argument("--quantile", type=float, default=0.25, help="with --decide-again: each round's statistic")
    parser.add_argument(
        "--first-rounds", type=int, help="with --decide-again: decide on each side's first N rounds only"
    )
    parser.add_argument(
        "--sample-fraction",
        type=float,
        default=1.0,
        help="with --decide-again: decide on the first fraction of each round's samples (a shorter repeat budget)",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        help=(
            "with --decide-again: decide as a comparison with this cap on follow-up rounds would, each row at "
            "the alpha of its last look (default: the cap each comparison used)"
        ),
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="S",
        help=(
            f"seconds the study may take ({MIN_BUDGET_S:g} to {MAX_BUDGET_S:g}): at S the comparison running is "
            "interrupted (its finished rounds decide) and none starts whose planned rounds would not fit"
        ),
    )
    parser.add_argument("--log", type=Path, help="also write the progress, ETA and tables to this file as they come")
    parser.add_argument(
        "--numel", type=int, help=f"elements per tensor of the study's cases (1 to {MAX_NUMEL}; default: by device)"
    )
    args = parser.parse_args(argv)
    problem = _bad_flag(args)
    if problem:
        print(f"compare_power: {problem}", file=sys.stderr)
        return 2
    effects = [float(f) for f in args.effects.split(",") if f]
    if args.decide_again:
        kept = decide_again(args.decide_again, args.quantile, args.first_rounds, args.sample_fraction, args.max_rounds)
        print(render(kept, effects, args.extra_prims))
        return 0
    kinds = [kind for kind in ("AA", "AB") if kind in args.kinds.split(",")]
    clock = StudyClock(args.tries * len(kinds), _planned_rounds(args.compare_args), args.budget, open_log(args.log))
    numel = args.numel or SIZES[args.device]
    with tempfile.TemporaryDirectory(prefix="fusebench-power-") as scratch:
        repo = Path(scratch) / "repo"
        base, changed = build_history(repo, effects, args.extra_prims, numel, args.replicas)
        keep = args.keep or Path(scratch) / "json"
        keep.mkdir(parents=True, exist_ok=True)
        selection = ["--suite", "power_study", "--variant", args.variants, "--device", args.device, "--quick"]
        selection += args.compare_args.split()
        clock.say(_plan_line(args, kinds, effects, numel, clock))
        results: dict[str, list[list[dict]]] = {"A/A": [], "A/B": []}
        interrupted = 0
        for attempt in range(args.tries):
            for kind in kinds:
                if not clock.can_start_another():
                    clock.say(f"power study: no time left in --budget {args.budget:g} for another comparison")
                    break
                other = base if kind == "AA" else changed
                label = f"{kind[0]}/{kind[1]} {attempt + 1} of {args.tries}"
                entries, stopped = compare(repo, base, other, selection, keep / f"{kind}-{attempt}.json", clock, label)
                interrupted += stopped
                if entries is not None:
                    results[f"{kind[0]}/{kind[1]}"].append(entries)
                clock.say(f"power study: {label} done at {format_duration(clock.elapsed())}; the table so far:")
                clock.say(render(results, effects, args.extra_prims))
            else:
                continue
            break
        done = sum(len(r) for r in results.values())
        table = render(results, effects, args.extra_prims)
        footer = f"\n{done} comparisons in {clock.elapsed():.0f} s ({args.device})"
        footer += (
            f", {interrupted} interrupted by --budget (decided on the rounds they finished)" if interrupted else ""
        )
        print(table + footer)
        if clock.log is not None:
            clock.log.write(table + footer + "\n")
            clock.log.close()
    return 0


def _bad_flag(args: argparse.Namespace) -> str:
    """One line naming the first flag out of range and the range, or ''."""
    if args.budget is not None and not MIN_BUDGET_S <= args.budget <= MAX_BUDGET_S:
        return f"--budget {args.budget:g}: expected seconds from {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g}"
    if args.numel is not None and not 1 <= args.numel <= MAX_NUMEL:
        return f"--numel {args.numel}: expected 1 to {MAX_NUMEL} elements"
    if not 1 <= args.replicas <= MAX_REPLICAS:
        return f"--replicas {args.replicas}: expected 1 to {MAX_REPLICAS}"
    if not 1 <= args.tries <= MAX_TRIES:
        return f"--tries {args.tries}: expected 1 to {MAX_TRIES}"
    if not {kind for kind in args.kinds.split(",")} <= {"AA", "AB"} or not args.kinds:
        return f"--kinds {args.kinds}: expected AA, AB or AA,AB"
    return ""


def _planned_rounds(compare_args: str) -> int:
    """The planned rounds each comparison runs: --rounds among `compare_args`, else compare's default."""
    words = compare_args.split()
    for index, word in enumerate(words):
        if word == "--rounds" and index + 1 < len(words):
            return int(words[index + 1])
        if word.startswith("--rounds="):
            return int(word.split("=", 1)[1])
    return DEFAULT_ROUNDS


def _plan_line(args: argparse.Namespace, kinds: list[str], effects: list[float], numel: int, clock: StudyClock) -> str:
    """What the study will run, in one line."""
    cases = len(effects) + 1 + (args.extra_prims > 0)
    variants = len([v for v in args.variants.split(",") if v])
    budget = f"; budget {format_duration(args.budget)}" if args.budget is not None else ""
    return (
        f"power study: {clock.comparisons} comparison(s) ({', '.join(kinds)} x {args.tries}) on {args.device}, "
        f"{clock.rounds} planned rounds each (2 runs of `fusebench run` per round), {cases * args.replicas * variants} "
        f"measurements per run ({cases} cases x {args.replicas} replicas x {variants} variants, {numel} elements); "
        f"noisy rows get follow-up rounds{budget}"
    )


def build_history(repo: Path, effects: list[float], extra_prims: int, numel: int, replicas: int = 1) -> tuple[str, str]:
    """The repository with commits A (the study's suite) and B (its slowdowns); their hashes."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("compiler", "fusebench", "suites"):
        shutil.copytree(ROOT / package, repo / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    suite = repo / "suites" / "power_study.py"
    reps = {"steady": BASE_REPS, **{_grow_name(f): BASE_REPS for f in effects}}
    suite.write_text(SUITE.format(reps=reps, numel=numel, replicas=replicas, with_adds=extra_prims > 0))
    _git(repo, "init", "-q")
    base = _commit(repo, "A: the power study's suite")
    grown = {**reps, **{_grow_name(f): round(BASE_REPS * f) for f in effects}}
    suite.write_text(SUITE.format(reps=grown, numel=numel, replicas=replicas, with_adds=extra_prims > 0))
    elementwise = repo / "compiler" / "ops" / "elementwise.py"
    source = elementwise.read_text()
    if source.count(ADD_LINE) != 1:
        raise SystemExit(f"compiler/ops/elementwise.py no longer has {ADD_LINE.strip()!r} once: update ADD_LINE")
    slowed = "prims.mul(" * extra_prims + "a" + ", 1.0)" * extra_prims
    slowed_if_tensor = f"({slowed} if isinstance(b, TensorProxy) else a)"
    replacement = f"        return elementwise(lambda a, b: prims.add({slowed_if_tensor}, b), input, other)\n"
    elementwise.write_text(source.replace(ADD_LINE, replacement if extra_prims else ADD_LINE))
    return base, _commit(repo, f"B: grow cases x{effects}, +{extra_prims} mul per add")


def compare(
    repo: Path, a: str, b: str, selection: list[str], output: Path, clock: StudyClock, label: str
) -> tuple[list[dict] | None, bool]:
    """One `fusebench compare A B` (this checkout's): its benchmarks as the JSON lists them (None when
    the budget stopped it before any round finished), and whether the budget interrupted it."""
    inherited = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *inherited])}
    command = [sys.executable, "-m", "fusebench", "compare", a, b, *selection, "--repo", str(repo)]
    # compare's progress goes through the study's clock as it comes: a long GPU study stopped at a
    # time limit still shows how far each comparison got
    result = run_comparison([*command, "--json", str(output)], env, clock, label)
    if not output.exists():
        if result.interrupted:
            return None, True
        raise SystemExit(f"fusebench compare failed (exit {result.returncode}): its output is above")
    document = json.loads(output.read_text())
    noisy = document.get("noise", {}).get("noisy")
    return [{**entry, "noisy_machine": noisy} for entry in _timed(document["benchmarks"])], result.interrupted


def decide_again(
    folder: Path,
    quantile: float,
    first_rounds: int | None = None,
    sample_fraction: float = 1.0,
    max_rounds: int | None = None,
) -> dict[str, list[list[dict]]]:
    """The comparisons kept in `folder` (AA-*.json, AB-*.json), each benchmark decided again from its
    samples with the current rule (and the minimum effect and alpha the comparison used), on each
    side's `first_rounds` and each round's first `sample_fraction` of samples: what fewer rounds or a
    shorter repeat budget would have decided. Each row is decided at the alpha of its last look
    (`fusebench.compare.looks`) under the comparison's cap on rounds, or `max_rounds`: on samples
    kept without follow-ups, what the planned rounds' share of alpha decides."""

    def cut(side: dict) -> dict:
        rounds = [r[: max(1, round(len(r) * sample_fraction))] for r in side["rounds"][:first_rounds]]
        return {"rounds": rounds, "round_medians": [float(np.median(r)) for r in rounds]}

    from fusebench.commands.compare import comparison_noise
    from fusebench.compare.comparison import BenchmarkComparison, SideSummary
    from fusebench.compare.decide import DecisionSettings, decide
    from fusebench.compare.looks import LookSchedule

    results: dict[str, list[list[dict]]] = {"A/A": [], "A/B": []}
    for kind, prefix in (("A/A", "AA"), ("A/B", "AB")):
        for path in sorted(folder.glob(f"{prefix}-*.json")):
            document = json.loads(path.read_text())
            used = document.get("settings", {})
            settings = DecisionSettings(used.get("min_effect", 0.05), used.get("alpha", 0.01), quantile)
            planned = int(document.get("rounds", 1))
            cap = max_rounds or int(document.get("max_rounds", planned))
            schedule = LookSchedule(planned, max(cap, planned), settings.alpha)
            entries, comparisons = [], []
            for entry in _timed(document["benchmarks"]):
                a, b = cut(entry["a"]), cut(entry["b"])
                if not (a["rounds"] and b["rounds"]):
                    continue
                measured = min(len(a["rounds"]), len(b["rounds"]))
                looked = max(entry["a"].get("look", 0), entry["b"].get("look", 0))
                look = min(looked, sum(count < measured for count in schedule.looks))
                decision = decide(a["rounds"], b["rounds"], schedule.settings_at(look, settings))
                entries.append({**entry, "verdict": decision.verdict, "rounds": measured})
                sides = [SideSummary("ok", rounds=s["rounds"], round_medians=s["round_medians"]) for s in (a, b)]
                comparisons.append(BenchmarkComparison("", "", {}, entry["variant"], *sides, decision.verdict))
            noisy = comparison_noise(comparisons).noisy
            results[kind].append([{**entry, "noisy_machine": noisy} for entry in entries])
    return results


def render(results: dict[str, list[list[dict]]], effects: list[float], extra_prims: int) -> str:
    """Per (kind, case, variant): the true effect and how many comparisons gave each verdict."""
    counts: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    rounds: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for kind, comparisons in results.items():
        for benchmarks in comparisons:
            for entry in benchmarks:
                counts[(kind, _base(entry["case"]), entry["variant"])][entry["verdict"]] += 1
                rounds[(kind, _base(entry["case"]), entry["variant"])].append(_rounds(entry))
    width = max([len("variant"), *(len(variant) for _, _, variant in counts)])
    header = f"{'compare':7} {'case':12} {'variant':{width}} {'true effect':>16}"
    lines = [f"{header}  slower  faster  noisy  no change  other  rounds (mean, max)"]
    for (kind, case, variant), verdicts in sorted(counts.items()):
        effect = _effect(kind, case, variant, extra_prims)
        other = sum(n for v, n in verdicts.items() if v not in ("slower", "faster", "noisy", "no change"))
        lines.append(
            f"{kind:7} {case:12} {variant:{width}} {effect:>16}  {verdicts['slower']:6}  {verdicts['faster']:6}  "
            f"{verdicts['noisy']:5}  {verdicts['no change']:9}  {other:5}  "
            f"{np.mean(rounds[(kind, case, variant)]):6.1f}, {max(rounds[(kind, case, variant)])}"
        )
    tries = len(results["A/A"])
    quiet = sum(not any(e["verdict"] in FLAGS for e in benchmarks) for benchmarks in results["A/A"])
    unchanged = [
        e for bs in results["A/B"] for e in bs if _effect("A/B", _base(e["case"]), e["variant"], extra_prims) == "none"
    ]
    same = [e for bs in results["A/A"] for e in bs]
    false_ab = sum(e["verdict"] in FLAGS for e in unchanged)
    noisy_machine = sum(bool(bs and bs[0]["noisy_machine"]) for kind in results.values() for bs in kind)
    lines += [
        "",
        f"A/A comparisons that flagged nothing: {quiet} of {tries}",
        f"rows flagged in A/A comparisons: {sum(e['verdict'] in FLAGS for e in same)} of {len(same)}",
        f"unchanged rows flagged in A/B comparisons: {false_ab} of {len(unchanged)}",
        f"comparisons that called the machine noisy: {noisy_machine} of {sum(map(len, results.values()))}",
    ]
    return "\n".join(lines)


def _rounds(entry: dict) -> int:
    """The rounds a row got, follow-ups included (a comparison from before follow-ups: its A side's)."""
    if "rounds" in entry:
        return int(entry["rounds"])
    return len(entry.get("a", {}).get("rounds", [])) if isinstance(entry.get("a"), dict) else 0


def _timed(benchmarks: list[dict]) -> list[dict]:
    """The time rows of a comparison: the study's effects are on time; its memory rows (judged too,
    with their own verdicts) would count every trial twice."""
    return [entry for entry in benchmarks if entry.get("metric", TIME.name) == TIME.name]


def _effect(kind: str, case: str, variant: str, extra_prims: int) -> str:
    if kind == "A/A" or case == "steady":
        return "none"
    if case == "adds":
        if not extra_prims or not variant.startswith("fusebench"):
            return "none"
        return f"+{extra_prims} mul/add" if variant == "fusebench-torch" else f"+{extra_prims} mul/add, fused"
    factor = int(case.removeprefix("grow_")) / 100
    return f"x{round(BASE_REPS * factor) / BASE_REPS:g} work"


def _base(case: str) -> str:
    """The case's name without its replica suffix ('grow_150_r3' -> 'grow_150')."""
    return case.rsplit("_r", 1)[0] if "_r" in case else case


def _grow_name(factor: float) -> str:
    """'grow_150' for a factor of 1.5 (case names are identifiers)."""
    return f"grow_{round(factor * 100)}"


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=compare power", "-c", "user.email=power@fusebench.invalid", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


if __name__ == "__main__":
    raise SystemExit(main())
