"""The loop of the long-lived profiler child that `profiler_process.ProfilerProcess` starts.

Run by path, `python profiler_child.py JOBS_FD ANSWERS_FD FOLDER [MODULE ...]`, so that it does not
import the compiler's package (all of the compiler, which no repro script needs). It first imports
each MODULE it can (torch and nvFuser: a child started ahead of its first job has them loaded by
then), then reads jobs from the pipe JOBS_FD, one JSON line each: `{"id": N, "script": PATH,
"output": PATH}`, acknowledges each at once with `{"id": N, "started": true}` (so the parent can
tell a child that died before a job from one the job killed), and runs the script as `python
SCRIPT --profile-json OUTPUT` would (`__main__`, the script's folder first on sys.path). A script
that raises gets its traceback written to `OUTPUT.error`, and the loop carries on. After each job
it frees what the script left (a collection, and torch's cached CUDA memory where CUDA is
initialized), flushes stdout and stderr, and answers `{"id": N, "error": traceback or null}`.
Answers are JSON lines on the pipe ANSWERS_FD, which no print of a script reaches. It ends when
JOBS_FD ends (the parent closed it, or died) and then removes FOLDER, where its stdout and stderr
went, so a parent that crashed leaves nothing behind.

Fatal signals (a segfault in nvFuser) and SIGUSR1 (the parent's signal before it kills a job that
ran past its timeout) dump every thread's Python stack to stderr, for the parent's report.
"""

from __future__ import annotations

import faulthandler
import gc
import importlib
import json
import os
import runpy
import shutil
import signal
import sys
import traceback
from pathlib import Path
from typing import TextIO


def run_job(script: str, output: str) -> str | None:
    """Runs `script` as `python SCRIPT --profile-json OUTPUT`; its traceback if it raised or exited
    with a status other than 0 (also written to OUTPUT.error), else None."""
    saved_argv, saved_path0 = sys.argv, sys.path[0]
    sys.argv = [script, "--profile-json", output]
    sys.path[0] = str(Path(script).resolve().parent)
    try:
        runpy.run_path(script, run_name="__main__")
        return None
    except SystemExit as end:
        if end.code in (None, 0):  # NOTE: `python SCRIPT` would have succeeded
            return None
        error = traceback.format_exc()
    except BaseException:
        error = traceback.format_exc()
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path0
    Path(output + ".error").write_text(error)
    return error


def free_memory() -> None:
    """Collects what the last script left in reference cycles (its globals, its tensors) and hands
    torch's cached CUDA blocks back, so that big inputs do not stay on the GPU between jobs."""
    gc.collect()
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        cuda.empty_cache()


def preload(modules: list[str]) -> None:
    """Imports each of `modules` that imports; a script that needs a missing one fails on its own."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # NOTE: the script's own import then reports it, as `python SCRIPT` would
            print(f"profiler child: cannot preload {module}:\n{traceback.format_exc()}", file=sys.stderr)


def serve(jobs_fd: int, answers_fd: int) -> None:
    """Runs the jobs read from `jobs_fd` one at a time, answering each on `answers_fd`."""
    with os.fdopen(jobs_fd, "r", encoding="utf-8") as jobs, os.fdopen(answers_fd, "w", encoding="utf-8") as answers:
        for line in jobs:
            job = json.loads(line)
            _answer(answers, {"id": job["id"], "started": True})
            error = run_job(job["script"], job["output"])
            free_memory()
            sys.stdout.flush()
            sys.stderr.flush()
            _answer(answers, {"id": job["id"], "error": error})


def _answer(answers: TextIO, answer: dict) -> None:
    answers.write(json.dumps(answer) + "\n")
    answers.flush()


if __name__ == "__main__":
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    preload(sys.argv[4:])
    serve(int(sys.argv[1]), int(sys.argv[2]))
    shutil.rmtree(sys.argv[3], ignore_errors=True)
