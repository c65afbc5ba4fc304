"""compiler.examine: fusions and their inputs, why ops were not fused, repro scripts, segment hints."""

from __future__ import annotations

import json
import sys

import pytest
import torch

import compiler
from compiler import examine, prims
from compiler.core.executor import Reason
from compiler.executors.nvfuser.diagnose import fake_nvfuser
from compiler.executors.nvfuser.diagnose.profiler_child import run_job
from compiler.executors.nvfuser.diagnose.profiler_process import ProfilerProcess
from compiler.executors.nvfuser.diagnose.repro import ops_by_scheduler, segmentation_hint
from compiler.executors.nvfuser.executor import region_fusions
from suites.adam_step import adam_step
from suites.llm_norms import _rotary_inputs, rotary
from tests.support.nvfuser_cases import gelu_bias_backward, split3, write_back
from tests.support.nvfuser_helpers import fake_nvfuser as fake_backend  # noqa: F401 - a fixture


def jit_torch_regions(fn, numbers="constant", **fusion):
    return compiler.jit(fn, numbers=numbers, executors=["nvfuser", "sdpa"], fusion={"runner": "torch", **fusion})


def test_fusions_lists_ops_and_the_last_inputs_layouts_and_scalar_values():
    jfn = jit_torch_regions(split3, numbers="symbolic")
    a = torch.randn(8, 16, 64)[:, :, :40]
    jfn(a, 3, 8)
    jfn(a, 5, 8)
    (info,) = examine.fusions(jfn)
    assert info.name == "nvFusion0" and info.calls == 2 and len(info.ops) == 6
    tensor, d0, i2, i3 = info.inputs
    assert (tensor.shape, tensor.stride, tensor.dtype, tensor.device) == (
        (8, 16, 40),
        (1024, 64, 1),
        torch.float32,
        a.device,
    )
    assert (d0.value, i2.value, i3.value) == (5, 13, 40)
    text = str(examine.fusions(jfn))
    assert "a: torch.float32 [8, 16, 40] stride=[1024, 64, 1] on cpu" in text and "d0: int = 5" in text


def test_why_not_fused_gives_a_reason_for_every_op_outside_a_fusion():
    def program(a, q):
        x = a.sin()
        y = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        return x, prims.floor_divide(a, 2.0), a[::2], y.to(torch.int8), prims.argmax(a, 1), x.permute(1, 0)

    jfn = jit_torch_regions(program)
    jfn(torch.randn(4, 8), torch.randn(1, 1, 4, 8))
    found = {d.bsym.sym.value: (d.reason, d.detail) for d in examine.why_not_fused(jfn)}
    assert found["sin"][0] is Reason.TOO_SMALL
    assert found["sdpa"][0] is Reason.LEFT_TO_TORCH and "sdpa" in found["sdpa"][1]
    assert found["floor_divide"][0] is Reason.LEFT_TO_TORCH
    assert found["slice"][0] is Reason.NO_TRANSLATION and "step" in found["slice"][1]
    assert found["convert_element_type"][0] is Reason.DTYPE and "int8" in found["convert_element_type"][1]
    assert found["argmax"][0] is Reason.LEFT_TO_TORCH
    assert found["permute"][0] in (Reason.SHAPE_ONLY, Reason.TOO_SMALL)
    assert "-> region too small" in str(examine.why_not_fused(jfn))


def test_why_not_fused_reports_fuel():
    jfn = jit_torch_regions(lambda a: (a.sin().exp(), prims.floor_divide(a, 2.0).cos().neg()), fuel=1, horizontal=False)
    jfn(torch.randn(4, 8))
    assert {d.reason for d in examine.why_not_fused(jfn)} == {Reason.FUEL, Reason.LEFT_TO_TORCH}


def test_examine_needs_a_called_jitted_function():
    with pytest.raises(RuntimeError, match="has not been called"):
        examine.fusions(compiler.jit(lambda a: a))
    with pytest.raises(TypeError, match=r"compiler\.jit"):
        examine.fusions(lambda a: a)


@pytest.fixture
def fake_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvfuser_direct", fake_nvfuser.module())


@pytest.mark.parametrize("which", ["gelu", "write_back", "split3", "rotary_bf16", "symbolic_size"])
def test_repro_script_defines_checks_and_matches_pytorch(which, tmp_path, fake_module):
    # rotary_bf16: the reference holds float32 values converted to bf16 in float32, as the fusion
    # does; eager's rounding of q * cos and rotate_half(q) * sin each differs by up to 0.06 here
    if which == "rotary_bf16":
        args = _rotary_inputs({"shape": (2, 4, 64, 32), "dtype": "bfloat16"}, torch.device("cpu"), 0)
        jfn = jit_torch_regions(rotary)
    elif which == "gelu":
        x = torch.randn(2, 3, 8)
        jfn, args = jit_torch_regions(gelu_bias_backward, numbers="symbolic"), (0.1, 0.2, 0.3, 0.4, x, x, x)
    elif which == "write_back":
        jfn, args = jit_torch_regions(write_back), (torch.randn(4, 8), torch.randn(4, 8))
    elif which == "symbolic_size":  # the size is a region input the definition does not take
        jfn = compiler.jit(
            lambda x: x - x.amax(-1, keepdim=True),
            dynamic=["x.size(0)"],
            executors=["nvfuser"],
            fusion={"runner": "torch", "min_region_size": 1},
        )
        args = (torch.randn(5, 8),)
    else:
        jfn, args = jit_torch_regions(split3, numbers="symbolic"), (torch.randn(8, 16, 64), 3, 8)
    jfn(*args)
    path = examine.repro(jfn, "nvFusion0", tmp_path / "repro.py")
    source = path.read_text()
    imported = sorted(line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from ")))
    # nothing from fusebench
    assert imported == ["argparse", "json", "nvfuser_direct", "os", "re", "statistics", "sys", "torch", "traceback"]
    assert examine.fusion_source_of(jfn, "nvFusion0") in source
    scope = {"__name__": "repro"}
    exec(compile(source, str(path), "exec"), scope)
    inputs = scope["make_inputs"]()
    fusion = region_fusions(compiler.last_traces(jfn)[-1])[0]
    assert [tuple(x.stride()) for x in inputs if isinstance(x, torch.Tensor)] == [
        r.stride for r in fusion.last_inputs if r.shape is not None
    ]
    expected_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    expected = scope["reference"](*expected_inputs)
    fd = scope["FusionDefinition"]()
    with fd:
        scope["nvfusion_0"](fd)
    got = scope["execute"](fd, inputs)
    assert scope["DEFINITION_INPUTS"] == ([0] if which == "symbolic_size" else list(range(len(inputs))))
    assert not scope["COPIED"]  # write_back's buffer is written by the fusion itself
    for g, w in zip(got, expected):
        torch.testing.assert_close(g, w)
    for i in scope["WRITTEN_INPUTS"]:
        torch.testing.assert_close(inputs[i], expected_inputs[i])
    assert scope["WRITTEN_INPUTS"] == ([0] if which == "write_back" else [])


def test_segmentation_hint_and_op_placement_for_a_reduction_next_to_pointwise_math():
    x = torch.randn(2, 3, 8)
    jfn = jit_torch_regions(gelu_bias_backward)
    jfn(0.1, 0.2, 0.3, 0.4, x, x, x)
    region = region_fusions(compiler.last_traces(jfn)[-1])[0].region
    assert "reduction" in segmentation_hint(region)
    placed = ops_by_scheduler(region, ["reduction", "pointwise"])
    assert [line.split(" =")[0] for line in placed[0]] == ["t23"]
    assert len(placed[1]) == len(region.bsyms) - 1
    assert ops_by_scheduler(region, ["pointwise"]) == {0: [str(b).split("  #")[0] for b in region.bsyms]}


def test_op_placement_puts_a_softmax_reduction_in_the_persistent_kernel_and_a_mean_in_the_reduction():
    # nvFuser's 2 kernels for a cross entropy (H100): inner_persistent 110.0 us, reduction 7.9 us;
    # before, the rows' max, sum of exps and target logit were all placed in the `reduction` one
    logits, targets = torch.randn(8, 32), torch.randint(0, 32, (8,))
    jfn = jit_torch_regions(lambda x, t: torch.nn.functional.cross_entropy(x, t))
    jfn(logits, targets)
    region = region_fusions(compiler.last_traces(jfn)[-1])[0].region
    placed = ops_by_scheduler(region, ["inner_persistent", "reduction"])
    prims_in = {seg: [line.split(" = ")[1].split("(")[0] for line in lines] for seg, lines in placed.items()}
    assert {"prims.amax", "prims.exp", "prims.log", "prims.take_along_dim"} <= set(prims_in[0]), placed
    assert prims_in[0].count("prims.sum") == 1, placed  # the sum of exps: same rows as the max
    assert prims_in[1] == ["prims.convert_element_type", "prims.sum", "prims.sum", "prims.div"], placed
    assert sum(map(len, placed.values())) == len(region.bsyms)


def test_segments_explains_it_needs_nvfuser():
    jfn = jit_torch_regions(lambda a: a.sin().exp())
    jfn(torch.randn(4))
    with pytest.raises(RuntimeError, match="did not run with nvFuser"):
        examine.segments(jfn)


def test_fusions_and_why_not_fused_cover_the_backward_with_backward_true(tmp_path):
    def program(x, b, q):
        y = torch.nn.functional.gelu(x + b, approximate="tanh")
        return y, torch.nn.functional.scaled_dot_product_attention(q, q, q)

    jfn = jit_torch_regions(program)
    x, b = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    q = torch.randn(1, 1, 4, 8, requires_grad=True)
    y, attention = jfn(x, b, q)
    (y.sum() + attention.sum()).backward()
    forward = [f.ops for f in examine.fusions(jfn)]
    (backward,) = examine.fusions(jfn, backward=True)
    assert backward.calls == 1 and any(" = prims.sum(" in op for op in backward.ops)
    assert [f.ops for f in examine.fusions(jfn)] == forward and not any("sum" in op for ops in forward for op in ops)
    outside = {d.bsym.sym.value: d.reason for d in examine.why_not_fused(jfn, backward=True)}
    assert outside["sdpa_backward"] is Reason.LEFT_TO_TORCH
    assert examine.repro(jfn, backward.name, tmp_path / "repro.py", backward=True).read_text().count("sum") >= 1
    with torch.no_grad():
        jfn(x, b, q)
    with pytest.raises(RuntimeError, match="compiled no backward"):
        examine.fusions(jfn, backward=True)


def test_backward_true_shows_the_backward_that_ran_when_an_output_gets_no_cotangent(tmp_path):
    # a training step that returns its logits but backpropagates only the loss runs a backward
    # compiled for that one cotangent: examine shows its fusions, which are the ones that ran
    def program(x, w):
        logits = (x * w).tanh()
        return logits, (logits.exp() * 2).sum()

    jfn = jit_torch_regions(program)
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    for _ in range(2):
        _, loss = jfn(x, w)
        loss.backward()
    ran = examine.fusions(jfn, backward=True)
    assert ran and all(f.calls == 2 for f in ran)
    assert examine.repro(jfn, ran[0].name, tmp_path / "repro.py", backward=True).exists()
    logits, loss = jfn(x, w)
    (logits.sum() + loss).backward()  # now both cotangents: the other backward, called once
    assert all(f.calls == 1 for f in examine.fusions(jfn, backward=True))


def _run_repro_main(source: str, argv: list[str], monkeypatch) -> None:
    scope = {"__name__": "repro"}
    exec(compile(source, "repro.py", "exec"), scope)
    scope["median_ms"] = lambda fn, repeats=30: (fn(), 0.0)[1]  # CUDA events: not here
    monkeypatch.setattr(sys, "argv", ["repro.py", *argv])
    scope["main"]()


def test_a_repro_that_disagrees_raises_alone_and_is_profiled_with_the_disagreement(tmp_path, fake_module, monkeypatch):
    x = torch.randn(8, 16)
    jfn = jit_torch_regions(gelu_bias_backward)
    jfn(0.1, 0.2, 0.3, 0.4, x, x, x)
    source = examine.repro(jfn, "nvFusion0", tmp_path / "repro.py").read_text()
    _run_repro_main(source, [], monkeypatch)  # agrees: nothing raised
    original = fake_nvfuser._Fec.execute
    monkeypatch.setattr(fake_nvfuser._Fec, "execute", lambda self, *a, **k: [o + 1 for o in original(self, *a, **k)])
    with pytest.raises(AssertionError, match="output 0: Tensor-likes are not close"):
        _run_repro_main(source, [], monkeypatch)
    out = tmp_path / "profile.json"
    _run_repro_main(source, ["--profile-json", str(out)], monkeypatch)
    written = json.loads(out.read_text())
    assert written["kernels"] and written["mismatch"].startswith("output 0: Tensor-likes are not close")


def test_a_repro_that_nvfuser_refuses_ends_with_what_failed_in_one_line(tmp_path, fake_module, monkeypatch):
    x = torch.randn(8, 16)
    jfn = jit_torch_regions(gelu_bias_backward)
    jfn(0.1, 0.2, 0.3, 0.4, x, x, x)
    source = examine.repro(jfn, "nvFusion0", tmp_path / "repro.py").read_text()
    refusal = (
        "INTERNAL ASSERT FAILED at /workspace/Fuser/csrc/ops/alias.cpp:338, please report a bug\n"
        "Expected id->extent()->isConstScalar() . Can not squeeze dimension(s) with size != 1.\n"
        "Exception raised from squeeze at /workspace/Fuser/csrc/ops/alias.cpp:338 (most recent call first):\n"
        "frame #0: ..."
    )

    def refuse(self, *args, **kwargs):
        raise RuntimeError(refusal)

    monkeypatch.setattr(fake_nvfuser._Fec, "execute", refuse)
    said = (
        "nvFusion0: nvFuser failed: RuntimeError: alias.cpp:338: Expected id->extent()->isConstScalar() . "
        "Can not squeeze dimension(s) with size != 1."
    )
    with pytest.raises(SystemExit) as exited:
        _run_repro_main(source, [], monkeypatch)
    assert str(exited.value.code) == said
    # so does what examine.segments' profiler child reports of it, after nvFuser's own error
    error = run_job(str(tmp_path / "repro.py"), str(tmp_path / "profile.json"))
    assert error.rstrip().splitlines()[-1] == f"SystemExit: {said}" and "frame #0" in error


def test_a_segment_report_says_where_its_repro_disagreed(monkeypatch, fake_backend):  # noqa: F811
    kernel = examine.KernelInfo(0, "reduction", 0.01, 100.0, "k", "")
    monkeypatch.setattr(
        examine, "_profile_all", lambda fs: [examine.Profile([kernel], "", "output 0: off") for _ in fs]
    )
    x = torch.randn(8, 16)
    jfn = compiler.jit(gelu_bias_backward, executors=["nvfuser", "torch"])
    jfn(0.1, 0.2, 0.3, 0.4, x, x, x)
    [report] = examine.segments(jfn)
    assert report.mismatch == "output 0: off" and "disagrees with PyTorch on random inputs: output 0: off" in str(
        report
    )


def test_segments_profiles_each_distinct_fusion_once_in_one_child(monkeypatch, fake_backend):  # noqa: F811
    asked: list[list[str]] = []
    kernel = examine.KernelInfo(0, "pointwise", 0.01, 100.0, "nvfuser_pointwise_f0", "grid [1] block [1]")

    def profile_all(fusions):
        asked.append([f.name for f in fusions])
        return [examine.Profile([kernel], f"ir of {f.name}") for f in fusions]

    monkeypatch.setattr(examine, "_profile_all", profile_all)
    # one fusion per parameter (not batched into one)
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"batch_numel": 0})
    shapes = [(8, 4), (8, 4), (3,), (8, 4)]

    def tensors() -> list[torch.Tensor]:
        return [torch.randn(s) for s in shapes]

    jfn(tensors(), tensors(), tensors(), [t.abs() for t in tensors()], 3, 1e-3, 0.9, 0.999, 1e-8)
    reports = examine.segments(jfn)
    assert len(reports) == 4 and [len(r.kernels) for r in reports] == [1, 1, 1, 1]
    assert len(asked) == 1 and len(asked[0]) == 2, asked  # the three [8, 4] fusions share one profile
    assert {r.scheduled_ir for r in reports} == {f"ir of {name}" for name in asked[0]}


# A stand-in for a fusion's repro script (no GPU here): it writes what a repro script writes with
# `--profile-json OUT`, with the process that ran it as the scheduled IR.
STAND_IN_REPRO = """
import json, os, sys
out = sys.argv[sys.argv.index("--profile-json") + 1]
kernel = dict(segment=0, scheduler="pointwise", time_ms=0.02, bandwidth_gbs=50.0, name="{name}_k", launch="grid [1]")
print("{name}: 1 outputs match PyTorch")
json.dump(dict(kernels=[kernel], scheduled_ir=str(os.getpid())), open(out, "w"))
"""


def test_segments_runs_the_repro_scripts_in_one_long_lived_profiler_child(monkeypatch, fake_backend):  # noqa: F811
    monkeypatch.setattr(examine, "repro_script", lambda region, *_: STAND_IN_REPRO.format(name=region.name))
    profiler = ProfilerProcess(job_timeout_s=60, preload=())
    monkeypatch.setattr(examine, "shared_profiler", lambda: profiler)
    jfn = compiler.jit(adam_step, executors=["nvfuser", "torch"], fusion={"batch_numel": 0})
    shapes = [(8, 4), (8, 4), (3,), (8, 4)]
    tensors = [[torch.randn(s) for s in shapes] for _ in range(4)]
    jfn(*tensors[:3], [t.abs() for t in tensors[3]], 3, 1e-3, 0.9, 0.999, 1e-8)
    with profiler:
        reports = examine.segments(jfn)
        child = profiler.pid
        assert [r.kernels[0].time_ms for r in reports] == [0.02] * 4 and child is not None
        assert {r.scheduled_ir for r in reports} == {str(child)}
        assert {r.scheduled_ir for r in examine.segments(jfn, ["nvFusion1"])} == {str(child)}  # the same child
        monkeypatch.setattr(examine, "repro_script", lambda *_: "raise ValueError('no kernel for this layout')\n")
        with pytest.raises(
            RuntimeError,
            match=r"(?s)profiling nvFusion0 in a child process failed \(the script raised\)"
            r":\n.*ValueError: no kernel for this layout",
        ):
            examine.segments(jfn)
        assert profiler.pid == child


def test_segmentation_hint_names_a_write_computed_from_a_broadcast_made_inside():
    # a broadcast of an input is made outside (expanded_inputs); one of a sum the fusion computes is not
    def shifted(x, y):
        x.add_(y.sum(-1, keepdim=True))

    jfn = jit_torch_regions(shifted)
    jfn(torch.randn(4, 6), torch.randn(4, 6))
    [region] = [f.region for f in region_fusions(compiler.last_traces(jfn)[-1])]
    assert "writes into x a value computed from a broadcast" in segmentation_hint(region)
    jfn = jit_torch_regions(lambda x, w: x.mul_(w))
    jfn(torch.randn(4, 6), torch.randn(6))
    [region] = [f.region for f in region_fusions(compiler.last_traces(jfn)[-1])]
    assert segmentation_hint(region) is None


def test_segmentation_hint_names_the_parts_of_a_fusion_no_value_joins():
    def apart(x, y):
        x.mul_(2)
        return y + 1, y.exp()

    jfn = jit_torch_regions(apart)
    jfn(torch.randn(4, 6), torch.randn(4, 6))
    [region] = [f.region for f in region_fusions(compiler.last_traces(jfn)[-1])]
    hint = segmentation_hint(region)
    assert hint is not None and "2 parts that share no input" in hint, hint
    out, exp = (p.name for p in region.outputs)
    assert f"x | {out}, {exp}" in hint or f"{out}, {exp} | x" in hint, hint
    jfn = jit_torch_regions(lambda x, y: (x.mul_(y), y * 2))
    jfn(torch.randn(4, 6), torch.randn(4, 6))
    [region] = [f.region for f in region_fusions(compiler.last_traces(jfn)[-1])]
    assert segmentation_hint(region) is None
