"""Finding suites: modules that declare `CASES = [Case(...), ...]`.

By default the bundled `suites` package is searched (imported by name, never statically); with
`--suites DIR`, every `*.py` file in DIR is loaded instead, so a team can benchmark its own
programs without forking. Modules whose names start with `_`, and modules without `CASES`
(helpers, ASV adapters), are not suites. The suite's name is the module's file name.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from fusebench.cases.case import Case
from fusebench.errors import SuiteError, check

BUNDLED_PACKAGE = "suites"


@dataclass(frozen=True)
class Suite:
    """A module of cases."""

    name: str
    path: str
    cases: tuple[Case, ...]


def discover(folders: Sequence[str | Path] = (), package: str = BUNDLED_PACKAGE) -> list[Suite]:
    """The suites in `folders`, or in the bundled `package` when no folder is given, sorted by name."""
    suites = [s for folder in folders for s in discover_folder(folder)] if folders else discover_package(package)
    seen: dict[str, str] = {}
    for suite in suites:
        check(
            suite.name not in seen,
            lambda suite=suite: f"two suites are named {suite.name!r}: {seen[suite.name]} and {suite.path}",
            SuiteError,
        )
        seen[suite.name] = suite.path
    return sorted(suites, key=lambda s: s.name)


def suite_roots(folders: Sequence[str | Path] = (), package: str = BUNDLED_PACKAGE) -> list[Path]:
    """The folders whose files define the suites `discover(folders, package)` finds."""
    if folders:
        return [Path(folder) for folder in folders]
    return [Path(p) for p in importlib.import_module(package).__path__]


def discover_package(package_name: str) -> list[Suite]:
    """Suites among the top-level modules of an importable package."""
    try:
        package = importlib.import_module(package_name)
    except ImportError as error:
        raise SuiteError(
            f"the suites package {package_name!r} is not importable ({error}); run from the repository "
            "root, install the project (pip install -e .), or name a folder with --suites DIR"
        ) from error
    suites = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        qualified = f"{package_name}.{info.name}"
        module = _import(qualified, lambda qualified=qualified: importlib.import_module(qualified))
        suite = suite_from_module(info.name, module)
        if suite is not None:
            suites.append(suite)
    return suites


def discover_folder(folder: str | Path) -> list[Suite]:
    """Suites among the `*.py` files of `folder` (each loaded under a private module name)."""
    folder = Path(folder).resolve()
    check(
        folder.is_dir(), lambda: f"--suites {folder}: not a directory (expected a folder of suite modules)", SuiteError
    )
    tag = hashlib.sha1(str(folder).encode()).hexdigest()[:8]
    suites = []
    for path in sorted(folder.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = _import(str(path), lambda path=path: _load_file(path, f"_fusebench_suite_{tag}_{path.stem}"))
        suite = suite_from_module(path.stem, module)
        if suite is not None:
            suites.append(suite)
    return suites


def suite_from_module(name: str, module: ModuleType) -> Suite | None:
    """The suite a module declares through `CASES`, or None when it declares none."""
    cases = getattr(module, "CASES", None)
    if cases is None:
        return None
    where = getattr(module, "__file__", None) or module.__name__
    check(
        isinstance(cases, (list, tuple)),
        lambda: f"{where}: CASES is a {type(cases).__name__}; expected a list of fusebench.cases.Case",
        SuiteError,
    )
    names: set[str] = set()
    for index, case in enumerate(cases):
        check(
            isinstance(case, Case),
            lambda index=index, case=case: (
                f"{where}: CASES[{index}] is a {type(case).__name__}; expected fusebench.cases.Case"
            ),
            SuiteError,
        )
        check(case.name not in names, lambda case=case: f"{where}: two cases are named {case.name!r}", SuiteError)
        names.add(case.name)
    return Suite(name, str(where), tuple(cases))


def _load_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # NOTE: the folder is importable while the module runs, so suites can share helper modules.
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        sys.path.remove(str(path.parent))
    return module


def _import(where: str, load: Callable[[], ModuleType]) -> ModuleType:
    try:
        return load()
    except Exception as error:
        raise SuiteError(f"importing suite module {where} failed: {type(error).__name__}: {error}") from error
