"""docs/notebook.ipynb, the library's example: kept with its outputs stripped, and run end to end on two small real
runs of yolov8n at 64: one made here with hwprof.collect (timing, layers and kernels passes), the other the suite's
stored small run (tests/run_store.py) loaded with hwprof.load. nbclient runs it where it is installed (with a
Jupyter kernel); otherwise its code cells run as plain Python in one namespace, each last expression shown as a
notebook would (its repr), so a cell that fails or shows nothing is caught either way."""

from __future__ import annotations

import ast
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from run_store import option, stored_run

import hwprof

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebook.ipynb"


def code_cells() -> list[str]:
    doc = json.loads(NOTEBOOK.read_text())
    return ["".join(c["source"]) for c in doc["cells"] if c["cell_type"] == "code"]


def test_the_notebook_is_stored_without_outputs() -> None:
    doc = json.loads(NOTEBOOK.read_text())
    code = [c for c in doc["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 10
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    for source in code_cells():
        ast.parse(source)


def run_as_python(cells: list[str]) -> list[str]:
    """Each cell's output as a notebook shows it: what it printed, then the repr of its last expression's value
    (if not None); in one namespace."""
    space: dict[str, Any] = {"__name__": "__main__"}
    shown = []
    for source in cells:
        tree = ast.parse(source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(tree, "<cell>", "exec"), space)
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), space) if last else None
        shown.append(printed.getvalue() + ("" if value is None else repr(value)))
    return shown


def run_with_nbclient() -> list[str] | None:
    """The cells' text/plain outputs from a real kernel; None where nbclient or a kernel is missing."""
    try:
        import nbclient
        import nbformat
        from jupyter_client.kernelspec import NoSuchKernel
    except ImportError:
        return None
    nb = nbformat.read(NOTEBOOK, as_version=4)
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    except NoSuchKernel:
        return None
    return [
        "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in c.outputs)
        for c in nb.cells
        if c.cell_type == "code"
    ]


@pytest.mark.slow
def test_the_notebook_runs_on_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.chdir(tmp_path)
    small = {"model": "yolov8n", "imgsz": int(option("small", "--imgsz")), "iters": 3, "warmup": 1}
    a = hwprof.collect(**small, only=["timing", "flops", "perf_sampling"], perf_rate=1000, out=tmp_path / "a")
    stored = stored_run(tmp_path_factory, "small", tmp_path / "b")  # its layers pass: the compare's layer rows
    assert stored.returncode == 0, stored.stdout + stored.stderr
    b = hwprof.load(stored.path)
    assert a.status == b.status == "complete" and a.layers.height == b.layers.height > 0
    monkeypatch.setenv("NOTEBOOK_RUN", str(a.path))
    monkeypatch.setenv("NOTEBOOK_RUN_B", str(b.path))
    shown = run_with_nbclient() or run_as_python(code_cells())
    print("\n\n".join(s for s in shown if s))
    text = "\n".join(shown)
    assert "Run(" in shown[0] and "yolov8n" in shown[0]
    assert text.count("Figure") >= 3  # the stages, roofline and layer plots
    assert "forward" in text and ("compute" in text or "memory" in text)
    assert "time_ms" in text and "pct_peak" in text and "b_ratio" in text and "b_speedup" in text
    # the notebook's last section, run here on one cheap candidate: hwprof.advise returns the run with its advice
    assert a.advice is None and a.why("advice") is not None
    advised = hwprof.advise(a, only=["channels_last"], blocks=1, no_layers=True)
    assert advised.advice is not None and advised.why("advice") is None
    row = advised.advice.row(0, named=True)
    assert row["key"] == "channels_last" and row["status"] in ("measured", "changed output"), row
    assert row["forward_ratio"] is not None and row["forward_ratio"] > 0
