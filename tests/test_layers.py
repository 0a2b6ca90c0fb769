"""The layers of hwprof's code (docs/architecture.md): no import circles, and imports only go down.

grimp reads the import graph of the installed package (hwprof.collectors included: the checkout keeps it
in collectors/, so the test copies both into one tree first). Every import counts, those inside functions
and under TYPE_CHECKING too: a lazy import still ties the layers together.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hwprof
import hwprof.collectors

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("files", ("hwprof", "hwprof.core.atomic")),
    ("run schema", ("hwprof.schema",)),
    ("records and config", ("hwprof.core",)),
    ("hardware access", ("hwprof.perf", "hwprof.hardware")),
    ("workload", ("hwprof.workload",)),
    ("collectors", ("hwprof.collectors",)),
    ("run directory", ("hwprof.rundir",)),
    ("analysis", ("hwprof.analysis",)),
    ("render", ("hwprof.render", "hwprof.trace")),
    ("finishing a run", ("hwprof.session.finish",)),
    ("session", ("hwprof.session", "hwprof.advise", "hwprof.sweep", "hwprof.gpu")),
    ("command line", ("hwprof.cli",)),
    ("entry point", ("hwprof.__main__",)),
]
"""Bottom to top. A module is in the layer that names it or the package it is in (the longest name wins)."""

GRAPH = r"""
import grimp, json, sys
g = grimp.build_graph("hwprof", include_external_packages=False, cache_dir=None)
edges = {}
for m in sorted(g.modules):
    for w in sorted(g.find_modules_directly_imported_by(m)):
        lines = [d["line_number"] for d in g.get_import_details(importer=m, imported=w)]
        edges[f"{m} {w}"] = lines
json.dump(edges, sys.stdout)
"""


@pytest.fixture(scope="module")
def imports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[int]]:
    """(importer, imported) -> line numbers, for every import between two hwprof modules."""
    tree = tmp_path_factory.mktemp("layers")
    package = Path(hwprof.__file__).parent
    collectors = Path(hwprof.collectors.__file__).parent
    ignore = shutil.ignore_patterns("__pycache__", "collectors")
    shutil.copytree(package, tree / "hwprof", ignore=ignore)
    shutil.copytree(collectors, tree / "hwprof" / "collectors", ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-c", GRAPH], capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(tree)}
    )
    assert out.returncode == 0, out.stderr
    return {tuple(k.split(" ")): v for k, v in json.loads(out.stdout).items()}  # type: ignore[misc]


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "hwprof" and module.startswith(name + "."))
            if covers and (best is None or len(name) > best[1]):
                best = (rank, len(name))
    return best[0] if best else None


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in succ:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_layer(imports: dict[tuple[str, str], list[int]]) -> None:
    modules = {m for edge in imports for m in edge}
    unplaced = sorted(m for m in modules if layer_of(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS in {Path(__file__).name}): {unplaced}"


def test_no_import_circles(imports: dict[tuple[str, str], list[int]]) -> None:
    found = circles({e for e in imports if e[0] != e[1]})
    for component in found:
        print(f"circle of {len(component)} modules:")
        for a, b in sorted(imports):
            if a in component and b in component:
                print(f"  {a} -> {b} (line {', '.join(map(str, imports[(a, b)]))})")
    assert not found, f"{len(found)} import circles: " + "; ".join(" ".join(c) for c in found)


def test_imports_only_go_down(imports: dict[tuple[str, str], list[int]]) -> None:
    upward = []
    for (a, b), lines in sorted(imports.items()):
        la, lb = layer_of(a), layer_of(b)
        if la is not None and lb is not None and lb > la:
            upward.append(f"{a} ({LAYERS[la][0]}) -> {b} ({LAYERS[lb][0]}), line {', '.join(map(str, lines))}")
    for line in upward:
        print(line)
    assert not upward, f"{len(upward)} imports climb a layer:\n" + "\n".join(upward)


def test_the_layer_check_sees_a_climb_and_a_circle() -> None:
    assert layer_of("hwprof.collectors.rapl.collector") == layer_of("hwprof.collectors")
    assert layer_of("hwprof.session.finish") > layer_of("hwprof.render") > layer_of("hwprof.analysis")  # type: ignore[operator]
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert circles({("a", "b"), ("b", "c")}) == []
