"""Whether the Hugging Face zoo's models keep to two compiled entries over changing input sizes:
`python -m scripts.zoo_lengths [--models gpt2,falcon] [--modes forward,training] [--over length]
[--sizes 8,6,4,7] [--device cpu]`.

Each architecture of the zoo's tables (tiny configurations, nothing downloaded) is called as its
model card calls it (suites/_models/hf_zoo_inputs.py) through `compiler.jit` (automatic dynamic,
the device's default executors: Inductor regions on CPU, nvFuser on a GPU) at each size in turn,
against eager: every output, and in training every parameter's gradient. `--over length` cuts the
inputs' sequences to each size (at most the tiny inputs' 8 tokens); `--over batch` repeats the
batch and cuts it to each size. Two entries is the goal: the first call's, and the one automatic
dynamic compiles with the size symbolic when it changes. Per (architecture, mode) it prints
`ok`, the entries and, for more than two, each recompilation (which guard failed: a branch on the
size, a size kept constant); or the error where a call raised or disagreed with eager. A size the
model refuses eagerly (audio cut shorter than a convolution's kernel) must be refused by the
compiled model with an exception of the same type; `ok` then names it. A model
that loops in Python over its length (RWKV) is expected to take an entry per length.
"""

from __future__ import annotations

import argparse
import copy
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

import compiler
from suites._models.hf_zoo_inputs import (
    Architecture,
    assert_gradients_close,
    assert_outputs_close,
    call_inputs,
    every_architecture,
    tiny_model,
    training_loss,
)

TOLERANCE = {"cpu": {"atol": 1e-4, "rtol": 1e-4}, "cuda": {"atol": 1e-3, "rtol": 1e-3}}
MAX_LENGTH = 8  # the tiny inputs' sequence length


@dataclass
class Outcome:
    """One (architecture, mode): its entries after every size, the recompilations, or the error."""

    name: str
    mode: str
    sizes: tuple[int, ...]
    entries: int = 0
    recompilations: str = ""
    error: str | None = None
    refused: list[str] = field(default_factory=list)  # sizes eager raises at (as compiled does), with the type

    def __str__(self) -> str:
        head = f"{self.name} {self.mode} over {list(self.sizes)}: "
        if self.error is not None:
            return head + f"FAILED {self.error}"
        more = "" if self.entries <= 2 else "\n  " + self.recompilations.replace("\n", "\n  ")
        refused = f" (eager and compiled raise alike at {'; '.join(self.refused)})" if self.refused else ""
        return head + f"ok, {self.entries} entries" + refused + more


def sized(inputs: dict[str, torch.Tensor], over: str, size: int) -> dict[str, torch.Tensor]:
    """`inputs` at `size`: sequences cut to it (`over="length"`), or the batch repeated and cut."""
    if over == "length":
        return {k: v[:, :size].contiguous() if v.ndim > 1 else v for k, v in inputs.items()}
    return {k: torch.cat([v] * (size // len(v) + 1))[:size] if v.ndim else v for k, v in inputs.items()}


def check(zoo: Architecture, mode: str, over: str, sizes: Sequence[int], device: torch.device) -> Outcome:
    """Calls `zoo`'s model compiled and eager at each size in turn (see the module)."""
    outcome = Outcome(zoo.name, mode, tuple(sizes))
    training = mode == "training"
    try:
        eager = tiny_model(zoo, device).train(training)
        model = copy.deepcopy(eager)
        compiled = compiler.jit(model)
        full = call_inputs(zoo, training, device)
        for size in sizes:
            inputs = sized(full, over, size)
            where = f"{zoo.name} at {over} {size}"
            with torch.set_grad_enabled(training):
                torch.manual_seed(3)  # NOTE: a model that draws (a router's jitter) draws alike in both
                try:
                    expected = eager(**inputs)
                except Exception as refused:  # NOTE: a size the model refuses (audio shorter than a kernel)
                    _raises_as_eager(compiled, copy.deepcopy(inputs), refused, where)
                    outcome.refused.append(f"{over} {size}: {type(refused).__name__}")
                    continue
                torch.manual_seed(3)
                output = compiled(**copy.deepcopy(inputs))
            assert_outputs_close(output, expected, where, **TOLERANCE[device.type])
            if training:
                training_loss(output).backward()
                training_loss(expected).backward()
                assert_gradients_close(model, eager, where)
                model.zero_grad(set_to_none=True)
                eager.zero_grad(set_to_none=True)
        outcome.entries = len(compiled.entries)
        outcome.recompilations = str(compiler.examine.recompilations(compiled)) if compiled.entries else ""
    except Exception as error:
        outcome.error = " ".join(f"{type(error).__name__}: {error}".split())[:500]
    return outcome


def _raises_as_eager(compiled: Callable[..., object], inputs: dict, refused: Exception, where: str) -> None:
    """Raises AssertionError unless `compiled(**inputs)` raises an exception of `refused`'s type."""
    eager = type(refused).__name__
    try:
        compiled(**inputs)
    except type(refused):
        return
    except Exception as error:
        raise AssertionError(f"{where}: eager raises {eager}, compiled {type(error).__name__}") from error
    raise AssertionError(f"{where}: eager raises {eager}: {refused}; compiled returns")


def main(argv: list[str] | None = None) -> int:
    """Prints one outcome per (architecture, mode); exit status 1 where any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated architecture names (default: every one)")
    parser.add_argument("--modes", default="forward", help="forward, training or both, comma-separated")
    parser.add_argument("--over", choices=("length", "batch"), default="length")
    parser.add_argument("--sizes", default="8,6,4,7", help="comma-separated sizes, called in this order")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    zoo = every_architecture()
    names = args.models.split(",") if args.models else sorted(zoo)
    unknown = [n for n in names if n not in zoo]
    if unknown:
        parser.error(f"no architecture named {', '.join(unknown)} in the zoo; it has {', '.join(sorted(zoo))}")
    modes = args.modes.split(",")
    if set(modes) - {"forward", "training"}:
        parser.error(f"--modes: {args.modes!r}; expected forward, training or both")
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.over == "length" and max(sizes) > MAX_LENGTH:
        parser.error(f"--sizes: a length above the tiny inputs' {MAX_LENGTH} tokens ({max(sizes)})")
    failed = 0
    warnings.filterwarnings("ignore")  # NOTE: transformers' and the fallbacks' warnings: the outcomes say it
    for name in names:
        for mode in modes:
            outcome = check(zoo[name], mode, args.over, sizes, torch.device(args.device))
            failed += outcome.error is not None
            print(outcome, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
