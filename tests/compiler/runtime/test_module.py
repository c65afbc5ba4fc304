"""compiler.jit(nn.Module): parameters and buffers as inputs guarded by metadata (never by value),
modes guarded, arguments and output structures as eager has them, errors naming the module."""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import compiler
from compiler.runtime.module import LayoutReader
from compiler.tracing.module import ModuleLayout
from suites._models.gpt import GPT, Decoder, GPTConfig
from suites._models.llama import BlockDecoder, LlamaBlock, LlamaConfig


class MLP(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.drop = nn.Dropout(0.25)
        self.register_buffer("scale", torch.full((width,), 0.5))

    def forward(self, x, shift=1.0, *, gate=None):
        y = self.down(self.drop(F.gelu(self.up(x), approximate="tanh"))) * self.scale + shift
        return y if gate is None else y * gate


def test_parameters_are_inputs_and_an_optimizer_step_is_seen_without_recompiling() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    jitted = compiler.jit(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for _ in range(3):
        with torch.no_grad():
            torch.testing.assert_close(jitted(x), model(x))
        model(x).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    assert compiler.cache_stats(jitted).misses == 1
    computation = compiler.last_traces(jitted)[0]
    assert {p.name for p in computation.inputs} >= {"state_up_weight", "state_down_bias", "state_scale"}


def test_a_new_tensor_with_the_same_metadata_reuses_the_entry_and_a_new_shape_recompiles() -> None:
    model = MLP().eval()
    jitted = compiler.jit(model)
    x = torch.randn(3, 8)
    with torch.no_grad():
        jitted(x)
        model.up.weight = nn.Parameter(torch.randn(16, 8))
        model.scale = torch.full((8,), 3.0)
        torch.testing.assert_close(jitted(x), model(x))
        assert compiler.cache_stats(jitted).misses == 1
        model.scale = torch.full((1,), 2.0)
        torch.testing.assert_close(jitted(x), model(x))
    assert compiler.cache_stats(jitted).misses == 2


def test_train_and_eval_modes_are_guarded_for_every_submodule() -> None:
    model = MLP()
    jitted = compiler.jit(model)
    x = torch.randn(64, 8)
    with torch.no_grad():
        torch.manual_seed(3)
        compiled = jitted(x)
        torch.manual_seed(3)
        torch.testing.assert_close(compiled, model(x))  # dropout draws as eager does
        model.drop.eval()
        torch.testing.assert_close(jitted(x), model(x))
        assert compiler.cache_stats(jitted).misses == 2
        model.train()
        jitted(x)
    assert compiler.cache_stats(jitted).misses == 2


def test_positional_keyword_and_default_arguments() -> None:
    model = MLP().eval()
    jitted = compiler.jit(model)
    x, gate = torch.randn(2, 8), torch.randn(2, 8)
    with torch.no_grad():
        for args, kwargs in [((x,), {}), ((x, 2.5), {}), ((x,), {"shift": -1.0, "gate": gate})]:
            torch.testing.assert_close(jitted(*args, **kwargs), model(*args, **kwargs))


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    extras: dict
    loss: torch.Tensor | None = None


class Structured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, kind: str):
        y = self.linear(x)
        if kind == "dataclass":
            return Output(y, {"pair": Pair(y, -y), "n": 3})
        if kind == "ordered":
            return collections.OrderedDict(b=y, a=[y.sum(), None])
        return Pair(y, y * 2)


@pytest.mark.parametrize("kind", ["dataclass", "ordered", "namedtuple"])
def test_output_structures_come_back_as_eager_returns_them(kind: str) -> None:
    model = Structured()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled, expected = compiler.jit(model)(x, kind), model(x, kind)
    assert type(compiled) is type(expected)
    as_tree = dataclasses.asdict if kind == "dataclass" else (lambda value: value)
    flat_compiled, spec_compiled = torch.utils._pytree.tree_flatten(as_tree(compiled))
    flat_expected, spec_expected = torch.utils._pytree.tree_flatten(as_tree(expected))
    assert spec_compiled == spec_expected
    for a, b in zip(flat_compiled, flat_expected):
        torch.testing.assert_close(a, b) if isinstance(b, torch.Tensor) else None
    if kind == "dataclass":
        assert type(compiled.extras["pair"]) is Pair and compiled.loss is None and compiled.extras["n"] == 3
    if kind == "ordered":
        assert list(compiled) == ["b", "a"]


def test_tied_weights_are_one_input() -> None:
    model = GPT(GPTConfig.tiny())
    jitted = compiler.jit(model)
    tokens = torch.randint(0, 96, (2, 8))
    with torch.no_grad():
        jitted(tokens)
    names = [p.name for p in compiler.last_traces(jitted)[0].inputs]
    assert "state_wte_weight" in names and "state_lm_head_weight" not in names
    with torch.no_grad():
        model.lm_head.weight = nn.Parameter(torch.randn_like(model.wte.weight))  # untied: traced again
        torch.testing.assert_close(jitted(tokens)["logits"], model(tokens)["logits"])
    assert "state_lm_head_weight" in [p.name for p in compiler.last_traces(jitted)[0].inputs]


class Branchy(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), Branchy())

    def forward(self, x):
        return self.body(x)


def test_errors_name_the_module_and_the_op() -> None:
    model = Outer()
    with pytest.raises(compiler.TracingError, match=r"bool\(tensor\).*module 'body\.1' \(Branchy\)"):
        compiler.jit(model)(torch.randn(2, 4))
    model.body[0].register_full_backward_hook(lambda module, grad_input, grad_output: None)
    with pytest.raises(NotImplementedError, match=r"module 'body\.0' \(Linear\) has backward hooks"):
        compiler.jit(model)(torch.randn(2, 4))


@pytest.mark.parametrize("seed", [0, 1])
def test_gpt_and_llama_match_eager_in_prefill_and_decode(seed: int) -> None:
    torch.manual_seed(seed)
    gpt = GPT(GPTConfig.tiny())
    tokens, targets = torch.randint(0, 96, (2, 12)), torch.randint(0, 96, (2, 12))
    targets[0, :4] = -1
    block = LlamaBlock(LlamaConfig.tiny())
    x, positions = torch.randn(2, 6, 32), torch.arange(6)
    with torch.no_grad():
        compiled, expected = compiler.jit(gpt)(tokens, targets), gpt(tokens, targets)
        torch.testing.assert_close(compiled["loss"], expected["loss"])
        torch.testing.assert_close(compiled["logits"], expected["logits"])
        torch.testing.assert_close(compiler.jit(block)(x, positions), block(x, positions))
        for decoder, caches, args in [
            (Decoder(gpt), lambda: gpt.empty_caches(2, 16, torch.float32, torch.device("cpu")), (tokens[:, :1],)),
            (BlockDecoder(block), lambda: block.empty_cache(2, 16, torch.float32, torch.device("cpu")), (x[:, :1],)),
        ]:
            jitted, cache_compiled, cache_eager = compiler.jit(decoder), caches(), caches()
            for position in (0, 1, 5):
                where = torch.tensor([position])
                torch.testing.assert_close(jitted(*args, where, cache_compiled), decoder(*args, where, cache_eager))
                torch.testing.assert_close(cache_compiled, cache_eager)
            assert compiler.cache_stats(jitted).misses == 1


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1), torch.nn.LayerNorm(4))
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT-2's lm_head
        self.register_buffer("scale", torch.ones(4))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(tokens)) * self.scale)


def _same_reading(module: torch.nn.Module, reader: LayoutReader) -> None:
    want, got = reader.layout.read(), reader.read()
    assert (got is None) == (want is None)
    if want is not None:
        assert list(got) == list(want) and all(got[k] is want[k] for k in want)
    assert reader.modes() == reader.layout.modes()


def test_the_layout_reader_reads_what_the_layout_reads_through_every_change() -> None:
    model = _Tied()
    reader = LayoutReader(ModuleLayout(model))
    assert reader.other_tables  # the tied weight's second place is checked
    changes = [
        lambda: None,
        lambda: model.body[1].eval(),
        lambda: setattr(model.body[2], "training", 0),  # falsy, not a bool
        lambda: model.train(),
        lambda: setattr(model.body[0], "weight", torch.nn.Parameter(torch.randn(4, 4))),  # a new tensor: same layout
        lambda: setattr(model.head, "weight", torch.nn.Parameter(torch.randn(10, 4))),  # untied: not this layout
        lambda: setattr(model.head, "weight", model.embed.weight),  # tied again
        lambda: setattr(model.body[0], "bias", None),  # gone: not this layout
    ]
    for change in changes:
        change()
        _same_reading(model, reader)
    del model.body[2]._parameters["weight"]  # removed: a KeyError for both
    _same_reading(model, reader)


def test_a_jitted_module_follows_its_parameters_and_modes_call_after_call() -> None:
    model = _Tied()
    jfn = compiler.jit(model, executors=["torch"])
    tokens = torch.tensor([[1, 2, 3]])
    for step in range(4):
        model.train(step % 2 == 0)
        model.body[1].eval()  # dropout off in both modes: results compare exactly
        with torch.no_grad():
            model.embed.weight.add_(0.1)  # the tied weight changes for both of its places
        torch.testing.assert_close(jfn(tokens), model(tokens))
    model.head.weight = torch.nn.Parameter(torch.randn(10, 4))  # untied: a new layout, read again
    torch.testing.assert_close(jfn(tokens), model(tokens))


class _ModeProperty(torch.nn.Linear):
    """A module whose class defines `training` itself (not in the instance's __dict__)."""

    @property
    def training(self) -> bool:
        return self.__dict__.get("_mode", True)

    @training.setter
    def training(self, value: bool) -> None:
        self.__dict__["_mode"] = value


def test_the_layout_reader_reads_a_training_property_through_the_attribute() -> None:
    model = torch.nn.Sequential(_ModeProperty(3, 3), torch.nn.Dropout())
    reader = LayoutReader(ModuleLayout(model))
    for train in (True, False, True):
        model.train(train)
        _same_reading(model, reader)
    model[0].eval()
    _same_reading(model, reader)
    assert reader.modes() == "TET"
