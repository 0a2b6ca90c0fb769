"""One file name per concept (docs/architecture.md, "Names"): a newcomer guesses a module's path from its concept.

Two modules may share a file name only where they are one concept: the same role in each collector's own package
(collectors/<source>/collector.py, parse.py ...), or one concept at two layers, the lower one computing it and the
upper one showing or running it (analysis/whole_program.py and render/whole_program.py), listed in ONE_CONCEPT
with the concept. In a family package (hwprof/analysis/layers/, hwprof/render/advice/ ...) the family's folder is
part of the name: analysis/layers/rows.py and analysis/advice/rows.py are two names. Any other shared name fails
here, with the paths: rename one of them after what it does.
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COLLECTOR_ROLES = {
    "collector.py", "probe.py", "parse.py", "convert.py", "clock.py", "attribution.py", "sampler.py", "series.py",
}  # fmt: skip
"""A collector package's parts by role: its collector, whether its tool can run here (probed, kept in the cache),
its tool output parsed, converted, its clock, what it charges to layers, its sampling thread, its samples as
series."""

ONE_CONCEPT: dict[str, str] = {
    "advice/table.py": "the advice table: analysis computes it, render prints it",
    "gpu_import.py": "importing GPU recordings: the schema of the import, the command's options",
    "host.py": "the host: core reads it, the schema records it",
    "detections.py": "the boxes NMS kept: the record (schema), their tally over a pass (workload)",
    "neighbours.py": "other work on the run's CPUs: perf measures it, analysis judges it",
    "pass_files.py": "a pass's files: the schema of each, the run directory's reader and writer",
    "pipeline.py": "the pass's pipeline object: hwprof's own (workload) and a user's program's (program)",
    "records.py": "the JSONL records: the schema of each, the trace's reading of them",
    "run.py": "one run: run.json typed (schema), the library's Run (api)",
    "sweep/advice.py": "a sweep's advice: analysis computes, render prints",
    "sampler.py": "a sampling thread: perf's counters, and collectors' own",
    "weights.py": "a model's weights: their record in run.json (schema), their loading (workload)",
    "whole_program.py": "a program without a model: analysis computes its whole run, render prints it",
}


def _modules(root: Path = ROOT) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for top in ("hwprof", "collectors"):
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" not in path.parts and path.name != "__init__.py":
                by_name[_name(path.relative_to(root))].append(str(path.relative_to(root)))
    return by_name


def _name(rel: Path) -> str:
    """A module's name as a newcomer reads it: its file name, and in a family package (hwprof/analysis/layers/,
    hwprof/render/advice/ ...) the family's folder with it (`layers/rows.py`, `advice/rows.py`: two names)."""
    if rel.parts[0] == "hwprof" and len(rel.parts) >= 4:
        return f"{rel.parts[-2]}/{rel.name}"
    return rel.name


def _several_concepts(root: Path = ROOT) -> dict[str, list[str]]:
    """File names shared by modules that are not one concept."""
    shared = {name: paths for name, paths in _modules(root).items() if len(paths) > 1}
    return {
        name: paths
        for name, paths in shared.items()
        if name not in ONE_CONCEPT and not (name in COLLECTOR_ROLES and any(p.startswith("collectors/") for p in paths))
    }


def test_a_file_name_shared_by_two_modules_is_one_concept() -> None:
    bad = _several_concepts()
    assert not bad, f"one file name, several concepts (rename one after what it does): {bad}"


def test_the_list_of_shared_names_has_no_stale_entry() -> None:
    """A name in ONE_CONCEPT that no two modules share any more is taken out (the list says what is)."""
    shared = {name for name, paths in _modules().items() if len(paths) > 1}
    assert not set(ONE_CONCEPT) - shared


def test_the_check_sees_a_shared_name(tmp_path: Path) -> None:
    """The check can fail: a second tables.py in another package is caught."""
    for package in ("a", "b"):
        (tmp_path / "hwprof" / package).mkdir(parents=True)
        (tmp_path / "hwprof" / package / "tables.py").write_text("")
    assert _several_concepts(tmp_path) == {"tables.py": ["hwprof/a/tables.py", "hwprof/b/tables.py"]}


def _module_exists(name: str, root: Path = ROOT) -> bool:
    """hwprof.a.b is hwprof/a/b.py or hwprof/a/b/__init__.py; hwprof.collectors.x lives in collectors/x."""
    parts = name.split(".")
    base = root / "collectors" if parts[:2] == ["hwprof", "collectors"] else root / "hwprof"
    rest = parts[2:] if parts[:2] == ["hwprof", "collectors"] else parts[1:]
    path = base.joinpath(*rest)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of an hwprof module in `path`, lazy ones included, and of every
    `-m hwprof.x` a command line names."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "hwprof"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "hwprof":
            out.append((node.lineno, str(node.module)))
        elif isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            out += [(node.lineno, b) for a, b in itertools.pairwise(words) if a == "-m" and b.startswith("hwprof.")]
    return out


def test_every_hwprof_module_imported_or_run_exists() -> None:
    """A rename leaves no import behind, lazy ones (inside a function, run by one slow test) included."""
    files = [p for top in ("hwprof", "collectors", "tests", "scripts") for p in sorted((ROOT / top).rglob("*.py"))]
    missing = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        if "__pycache__" not in path.parts
        for line, name in _imported_modules(path)
        if name != "hwprof" and not _module_exists(name)
    ]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_the_import_check_sees_a_moved_module(tmp_path: Path) -> None:
    source = tmp_path / "user.py"
    source.write_text("def f():\n    from hwprof.program.scopes import layer_scopes\n")
    found = _imported_modules(source)
    assert found == [(2, "hwprof.program.scopes")] and not _module_exists("hwprof.program.scopes")
    assert _module_exists("hwprof.workload.script_scopes") and _module_exists("hwprof.collectors.sysstat.series")
