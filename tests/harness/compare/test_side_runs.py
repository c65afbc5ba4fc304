"""Each round of a comparison measures every variant again: its `fusebench run` never reuses a peer
measured by an earlier round (fusebench.history.peer_cache), which would repeat the same samples; an
environment variable says so, which a revision older than the peer cache ignores."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusebench.compare import interleave


def test_a_side_run_measures_peers_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environments: list[dict] = []

    class Finished:
        stderr: list[str] = []

        def __init__(self, command: list[str], env: dict, **kwargs: object) -> None:
            environments.append(env)

        def wait(self) -> int:
            return 0

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", Finished)
    side = interleave.Side("A", "main", "a" * 40, tmp_path)
    run = interleave.run_side(side, ["--device", "cpu"], tmp_path, 0, lambda line: None)
    assert run.error and environments[0]["FUSEBENCH_REUSE_PEERS"] == "0"
