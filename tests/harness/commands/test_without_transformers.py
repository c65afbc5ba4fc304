"""`fusebench list` and `run` on a machine without transformers (a dev extra): the Hugging Face
cases are listed and recorded as skipped, never imported. The absence is simulated in a child
process by finders that do not see the module, so `importlib.util.find_spec` says None as it does
when the package is not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

WITHOUT_TRANSFORMERS = textwrap.dedent(
    """
    import sys

    class Hidden:
        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "transformers":
                return None
            find = getattr(self.finder, "find_spec", None)
            return None if find is None else find(name, path, target)

    sys.meta_path[:] = [Hidden(finder) for finder in sys.meta_path]
    for name in [m for m in sys.modules if m.split(".")[0] == "transformers"]:
        del sys.modules[name]

    import importlib.util
    assert importlib.util.find_spec("transformers") is None

    from fusebench.cli import main

    print("list status", main(["list", "--suite", "hf_models", "--device", "cpu"]))
    arguments = ["run", "--suite", "hf_models", "-k", "gpt2", "--variant", "eager", "--device", "cpu"]
    print("run status", main([*arguments, "--results", sys.argv[1]]))
    print("imported", "transformers" in sys.modules)
    """
)


@pytest.mark.slow
def test_list_and_run_skip_the_hugging_face_cases_without_importing_transformers(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TRANSFORMERS, str(tmp_path / "results")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "model=gpt2, tokens=(2, 64), dtype=float32  (skipped here: transformers is not installed" in done.stdout
    assert "list status 0" in done.stdout and "run status 0" in done.stdout
    assert "skipped: transformers is not installed" in done.stdout
    assert "imported False" in done.stdout
