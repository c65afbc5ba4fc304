"""nvfuser_kernel_db: nvFuser's compiled kernels kept on disk, one locked slot per process, the
kernel_db option and TMPDIR given only to calls that may compile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import compiler
from compiler.executors.nvfuser.diagnose import fake_nvfuser
from compiler.executors.nvfuser.run import kernel_db
from tests.support.nvfuser_helpers import fake_nvfuser as fake_nvfuser_fixture  # noqa: F401 - a fixture


@pytest.fixture
def fresh_slot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The database under tmp_path, no slot taken yet; the slot's lock is released afterwards."""
    monkeypatch.setenv(kernel_db.KERNEL_DB_ENV, str(tmp_path))
    monkeypatch.setattr(kernel_db, "_tried", False)
    monkeypatch.setattr(kernel_db, "_slot", None)
    monkeypatch.setattr(kernel_db, "_lock_file", None)
    yield tmp_path
    if kernel_db._lock_file is not None:
        os.close(kernel_db._lock_file)


@pytest.mark.parametrize("setting", ["0", "off", "False"])
def test_the_environment_turns_it_off(monkeypatch, setting):
    monkeypatch.setenv(kernel_db.KERNEL_DB_ENV, setting)
    assert kernel_db.root("1.0") is None


def test_the_slots_live_under_the_cache_directory_by_version(monkeypatch, tmp_path):
    monkeypatch.delenv(kernel_db.KERNEL_DB_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    where = kernel_db.root("0.2.36+gitabc")
    assert where.parent == tmp_path / "fusebench" / "nvfuser_kernel_db"
    assert where.name.startswith("nvfuser-0.2.36+gitabc-cuda-")
    monkeypatch.setenv(kernel_db.KERNEL_DB_ENV, str(tmp_path / "elsewhere"))
    assert kernel_db.root("1.0").parent == tmp_path / "elsewhere"


def test_a_held_slot_is_not_given_twice_and_is_free_again_once_released(tmp_path):
    first = kernel_db.take_slot(tmp_path)
    second = kernel_db.take_slot(tmp_path)  # NOTE: a second open file: flock treats it as another holder
    assert first[0].name == "slot_0" and second[0].name == "slot_1"
    assert first[0].is_dir() and second[0].is_dir()
    os.close(first[1])
    again = kernel_db.take_slot(tmp_path)
    assert again[0].name == "slot_0"
    os.close(again[1])
    os.close(second[1])


def test_a_slot_held_by_another_process_is_skipped(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()", str(tmp_path / "slot_0.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        slot, fd = kernel_db.take_slot(tmp_path)
        assert slot.name == "slot_1"
        os.close(fd)
    finally:
        holder.communicate("")


def test_a_forked_child_takes_a_slot_of_its_own(fresh_slot):
    parent = kernel_db.slot("1.0")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its inherited state names the parent's slot
        try:
            os.write(write, str(kernel_db.slot("1.0")).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = Path(os.read(read, 4096).decode())
    os.waitpid(pid, 0)
    os.close(read)
    assert parent.name == "slot_0" and child.name == "slot_1"
    assert kernel_db.slot("1.0") == parent


def _database(slot: Path, kernel_bytes: int) -> Path:
    db = slot / "nvfuser_kernel_db"
    db.mkdir(parents=True)
    (db / "db.csv").write_text(
        "kernel_signature,compile_args,kernel_code_file,cubin_file\nk0,-arch,kernel_0.cu,kernel_0.cubin\n"
    )
    (db / "kernel_0.cu").write_bytes(b"x" * kernel_bytes)
    return db


@pytest.mark.parametrize(("kernel_bytes", "kept"), [(100, True), (5000, False)])
def test_a_slot_holding_too_many_bytes_is_emptied(tmp_path, kernel_bytes, kept):
    db = _database(tmp_path / "slot_0", kernel_bytes)
    slot, fd = kernel_db.take_slot(tmp_path, max_bytes=4096)
    os.close(fd)
    assert slot == tmp_path / "slot_0" and db.exists() == kept


def test_an_unwritable_place_turns_it_off(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert kernel_db.take_slot(blocker / "db") is None


@pytest.mark.parametrize("tmpdir_before", [None, "/some/tmp"])
def test_compiling_points_tmpdir_at_the_slot_only_meanwhile(fresh_slot, monkeypatch, tmpdir_before):
    if tmpdir_before is None:
        monkeypatch.delenv("TMPDIR", raising=False)
    else:
        monkeypatch.setenv("TMPDIR", tmpdir_before)
    with kernel_db.compiling("1.0") as enable:
        assert enable == ["kernel_db"]
        assert Path(os.environ["TMPDIR"]) == kernel_db.root("1.0") / "slot_0"
    assert os.environ.get("TMPDIR") == tmpdir_before


def test_overlapping_calls_restore_tmpdir_once_the_last_one_ends(fresh_slot, monkeypatch):
    monkeypatch.setenv("TMPDIR", "/some/tmp")
    first, second = kernel_db.compiling("1.0"), kernel_db.compiling("1.0")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # NOTE: the first to start ends first (two threads)
    assert Path(os.environ["TMPDIR"]).name == "slot_0"
    second.__exit__(None, None, None)
    assert os.environ["TMPDIR"] == "/some/tmp"


def test_compiling_is_a_no_op_when_off(monkeypatch):
    monkeypatch.setattr(kernel_db, "_tried", True)
    monkeypatch.setattr(kernel_db, "_slot", None)
    monkeypatch.setenv("TMPDIR", "/some/tmp")
    with kernel_db.compiling("1.0") as enable:
        assert enable == [] and os.environ["TMPDIR"] == "/some/tmp"


def scaled_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * 2 + y).exp()


def test_only_calls_that_compile_ask_for_the_database(fake_nvfuser_fixture, monkeypatch, fresh_slot):  # noqa: F811
    monkeypatch.delenv("TMPDIR", raising=False)
    fake_nvfuser.executed.clear()
    jfn = compiler.jit(scaled_sum)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    for _ in range(2):
        torch.testing.assert_close(jfn(x, y), scaled_sum(x, y))
    wide = torch.randn(3, 8)
    torch.testing.assert_close(jfn(wide, wide), scaled_sum(wide, wide))
    slot = str(kernel_db.root("fake") / "slot_0")
    assert fake_nvfuser.executed == [(("kernel_db",), slot), ((), None), (("kernel_db",), slot)]
    assert "TMPDIR" not in os.environ


_TWO_PROCESSES = textwrap.dedent(
    """
    import torch, compiler
    def f(x):
        return (x * 2).sin() + x.cos()
    x = torch.randn(64, 96, device="cuda")
    jfn = compiler.jit(f, fallback=False)
    torch.testing.assert_close(jfn(x), f(x))
    """
)


@pytest.mark.nvfuser
def test_a_second_process_loads_the_kernels_the_first_compiled(tmp_path):
    env = {**os.environ, kernel_db.KERNEL_DB_ENV: str(tmp_path)}
    listings = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _TWO_PROCESSES], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        (csv,) = tmp_path.glob("nvfuser-*/slot_0/nvfuser_kernel_db/db.csv")
        listings.append(csv.read_text().splitlines())
    assert len(listings[0]) >= 2  # the header and at least one kernel
    assert listings[1] == listings[0]  # the second process found every kernel there
