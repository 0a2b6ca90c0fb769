"""hwprof shipped to the nodes of a Ray cluster (hwprof/sweep/ray_env.py): the tree that travels, the node
probe's verdict, and, on a real local cluster, a node without hwprof that receives it and runs a point while a
node without torch is left out."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from ray_venv import finds, node_from, venv_without

from hwprof.sweep.ray_env import (
    JOB_CONFIG_ENV,
    driver_runtime_env,
    hwprof_runtime_env,
    install_fix,
    missing_here,
    probe_failure,
    requirements,
    shipped_dirs,
)

if TYPE_CHECKING:
    from ray_cluster import LocalCluster

pytest_plugins = ("ray_cluster",)  # the session's cluster (the last test)
ANSI_HEADER = "\x1b[36mray::describe_node()\x1b[39m (pid=27133, ip=192.0.2.2)"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hwprof" / "ray_env"


def test_the_shipped_tree_is_hwprof_as_installed_and_imports_alone(cache: Path) -> None:
    dirs = shipped_dirs()
    assert [d.name for d in dirs] == ["hwprof", f"hwprof-{importlib.metadata.version('hwprof')}.dist-info"]
    assert all(d.parent.parent == cache for d in dirs)
    tree = dirs[0]
    assert (tree / "collectors" / "__init__.py").is_file()  # ./collectors of a checkout, inside as in a wheel
    assert (tree / "collectors" / "sysstat" / "collector.py").is_file()
    assert (tree / "trace" / "tp_query.mjs").is_file() and any((tree / "workload" / "cfg").glob("*.yaml"))
    assert not [p for p in tree.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    # no site-packages (-S): hwprof and its version come only from where Ray unpacks the shipped directories
    # (each in a folder of its own, that folder on PYTHONPATH; here both in one); -P as the collect child runs
    code = "import hwprof, hwprof.collectors.base, importlib.metadata as m; print(hwprof.__file__, m.version('hwprof'))"
    out = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code],
        capture_output=True, text=True, check=True, cwd=cache,
        env={**os.environ, "PYTHONPATH": str(tree.parent)},
    ).stdout.split()  # fmt: skip
    assert out == [str(tree / "__init__.py"), importlib.metadata.version("hwprof")]
    assert hwprof_runtime_env() == {"py_modules": [str(d) for d in dirs]}


def test_the_tree_is_made_once_per_content(cache: Path) -> None:
    first = shipped_dirs()
    stamp = first[0].joinpath("cli", "main.py").stat().st_mtime_ns
    assert shipped_dirs() == first
    assert first[0].joinpath("cli", "main.py").stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir()] == [first[0].parent.name]


def test_a_submitted_job_keeps_the_runtime_env_it_was_given(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a Ray Job submitted with hwprof_runtime_env(), the sweep's ray.init adds none: Ray refuses to merge
    two py_modules (ValueError: Failed to merge the Job's runtime env)."""
    assert driver_runtime_env() == hwprof_runtime_env()
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {"py_modules": ["gcs://_ray_pkg_1.zip"]}}))
    assert driver_runtime_env() is None
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {"env_vars": {"A": "1"}}, "metadata": {}}))
    assert driver_runtime_env() == hwprof_runtime_env()


def test_requirements_are_the_dependencies_at_the_installed_versions() -> None:
    wanted = requirements()
    assert wanted["torch"] == importlib.metadata.version("torch")
    assert wanted["ultralytics"] == importlib.metadata.version("ultralytics")
    assert "pytest" not in wanted and "ray" not in wanted  # extras are not required on a node
    assert missing_here(wanted) == []


def test_a_node_lacking_a_dependency_is_told_which_and_how() -> None:
    wanted = {"psutil": importlib.metadata.version("psutil"), "numpy": "0.0.1+cpu", "no-such-dist-xq": "1.2"}
    missing = missing_here(wanted)
    assert missing == [
        "no-such-dist-xq (not installed; the driver has 1.2)",
        f"numpy (version {importlib.metadata.version('numpy')}; the driver has 0.0.1+cpu)",
    ]
    assert install_fix(missing, wanted) == "pip install 'no-such-dist-xq==1.2' 'numpy==0.0.1'"
    # a local version label (a CUDA build of the same torch) is the same version
    assert missing_here({"torch": importlib.metadata.version("torch").partition("+")[0] + "+cu124"}) == []


def test_a_failed_probe_is_one_line_without_ansi_naming_the_module() -> None:
    ray = pytest.importorskip("ray")
    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "RuntimeError: The remote function failed to import on the worker.\n"
        "ModuleNotFoundError: No module named 'psutil'"
    )
    exc = ray.exceptions.RayTaskError("describe_node", text, RuntimeError("failed to import"), pid=1, ip="1.2.3.4")
    assert "\x1b[" in str(exc)  # what Ray gives, and what the old refusal printed
    why = probe_failure(exc, {"psutil": "7.2.2"})
    assert why == "it cannot import psutil (ModuleNotFoundError); fix: on that node, `pip install 'psutil==7.2.2'`"
    setup = probe_failure(ray.exceptions.RuntimeEnvSetupError("Traceback ...\nOSError: [Errno 28] No space"), {})
    assert setup == "Ray could not set up hwprof's runtime_env there: OSError: [Errno 28] No space"
    other = probe_failure(ray.exceptions.RayTaskError("describe_node", "tb", ValueError(ANSI_HEADER + "\nx")), {})
    assert "\x1b" not in other and "\n" not in other and other.startswith("its probe failed: ValueError")


def test_left_out_nodes_get_no_point() -> None:
    from hwprof.analysis.sweep.rows import SweepPoint
    from hwprof.sweep.ray_connect import Cluster, LeftOut
    from hwprof.sweep.ray_plan import Job, RayOptions
    from hwprof.sweep.ray_plan import selector as _selector

    job = Job(1, SweepPoint("yolov8n", "torch", "fp32", 1, 1), None, Path("x"))
    left = [LeftOut("aa11", "h1", "it lacks torch"), LeftOut("bb22", "h2", "it lacks onnx")]
    assert _selector(job, Cluster({"cc33": {}}, {}, left), RayOptions("auto")) == {"ray.io/node-id": "!in(aa11,bb22)"}
    assert _selector(job, Cluster({"cc33": {}}, {}, []), RayOptions("auto")) == {}
    assert str(left[0]) == "node h1 (aa11) left out: it lacks torch"


# --- on a real local cluster -------------------------------------------------------------------------------


@pytest.fixture
def ray_head(ray_cluster: LocalCluster) -> Iterator[str]:
    """The session's cluster (tests/ray_cluster.py) with no measuring node: its head, which measures nothing;
    this process connected to it (the node helpers read ray.nodes())."""
    import ray

    ray.init(address=ray_cluster.measuring(0).address, log_to_driver=False)
    try:
        yield ray_cluster.address
    finally:
        ray.shutdown()


def _sweep(address: str, out: Path) -> subprocess.CompletedProcess[str]:
    """One point, the timing pass alone: what is tested is where it may run and what it imports there (the
    node that received hwprof runs points one at a time: a second point added a whole collect to the test)."""
    args = ["--models", "yolov8n", "--imgsz", "64", "--warmup", "0", "--iters", "1", "--threads", "1"]
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "sweep", "--ray", address, "--out", str(out), *args,
         "--", "--only", "timing"],
        capture_output=True, text=True, cwd=out.parent, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.slow
def test_a_node_without_hwprof_receives_it_and_one_without_torch_is_left_out(ray_head: str, tmp_path: Path) -> None:
    no_hwprof = venv_without(tmp_path / "venv-no-hwprof", "hwprof")
    no_torch = venv_without(tmp_path / "venv-no-torch", "hwprof", "torch")
    assert finds(no_hwprof, "hwprof", "torch", "ray") == [False, True, True]
    assert finds(no_torch, "hwprof", "torch", "ray") == [False, False, True]
    torch_version = importlib.metadata.version("torch")
    with node_from(no_torch, ray_head, tmp_path / "no-torch.log") as torchless:
        alone = _sweep(ray_head, tmp_path / "refused")
        assert alone.returncode == 2, alone.stdout + alone.stderr
        line = (alone.stdout + alone.stderr).strip()
        assert "\n" not in line and "\x1b" not in line, line
        assert "can run hwprof: node " in line and f"({torchless}) left out: it lacks torch" in line, line
        assert f"`pip install 'torch=={torch_version.partition('+')[0]}'`" in line, line
        with node_from(no_hwprof, ray_head, tmp_path / "no-hwprof.log") as shipped:
            done = _sweep(ray_head, tmp_path / "sweep")
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "sweep"
    sweep = json.loads((out / "sweep.json").read_text())
    assert [r["status"] for r in sweep["rows"]] == ["complete"]
    assert {t["node_id"] for t in json.loads((out / "ray_transfer.json").read_text())} == {shipped}
    left_out = [n for n in sweep["notes"] if " left out: " in n]
    assert len(left_out) == 1 and f"({torchless}) left out: it lacks torch (not installed" in left_out[0]
    assert left_out[0] in done.stdout  # said before the first point, not only in the table
    for row in sweep["rows"]:
        run = json.loads((out / Path(row["run_dir"]).name / "run.json").read_text())
        assert run["status"] == "complete"
        # the collect ran in the node's Python, which has no hwprof: it imported the shipped one, with its version
        assert run["host"]["packages"]["hwprof"] == importlib.metadata.version("hwprof")
        assert row["versions"]["hwprof"] == importlib.metadata.version("hwprof")
