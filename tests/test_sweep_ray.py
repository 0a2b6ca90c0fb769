"""`hwprof sweep --ray` on a real local Ray cluster: a head that measures nothing and worker nodes that
declare `hwprof: 1` (ray.cluster_utils.Cluster starts real raylets on this machine; the session's cluster of
tests/ray_cluster.py, with as many measuring nodes as a test asks for). Each test runs the installed CLI in a
child process against the cluster's address, as an operator would."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

ray = pytest.importorskip("ray")
from ray_nodes import collect_pids, sweep_cli  # noqa: E402

if TYPE_CHECKING:
    from ray_cluster import LocalCluster

pytest_plugins = ("ray_cluster",)  # the session's cluster
pytestmark = pytest.mark.slow

POINT_ARGS = ["--models", "yolov8n", "--imgsz", "64", "--warmup", "0", "--iters", "1"]
TWO_POINTS = ["--threads", "1", "--batch", "1,2"]
"""Two points that differ by their batch, one thread each: the tests look at where and how the points ran, which
a thread count does not change. With `--threads 1,2` the two-thread point's team lost its second CPU to the
other point (and to the suite's main process) at every barrier: it ended 6-7 s after the other one, and its
collect took 5.4 CPU-seconds against 3.1 for one thread (timing pass alone, measured on a busy host)."""
COLLECT_ARGS = ["--", "--only", "timing,flops"]
"""The points whose rows are compared with a local sweep's: the flops pass gives their GFLOPs and intensity."""
TIMING_ARGS = ["--", "--only", "timing"]
"""The points of the tests that look at where and whether a point ran, not at its FLOPs: one pass (one worker
process) per collect."""
MEASURED = {
    "latency_ms", "forward_ms", "iteration_ms", "fps", "forward_fps", "pct_peak", "bound", "j_per_image",
    "wall_s", "run_dir", "peaks_source", "energy_note",
}  # fmt: skip
"""Figures that differ from one run to the next, and where the run lies: not compared between sweeps."""
HOST_COLUMNS = {"host", "host_kind", "host_slug", "cpu_model", "cores", "isa", "versions"}
RUN_FACTS = {"node_id", "attempts"}
"""Where and when each attempt of a point ran on the cluster (empty in a local sweep)."""
RAY_CONSOLE_MARKS = ("(raylet)", "[state-dump]", "rpc_client.h", "gcs_client.cc", "core_worker", "pid=")
"""What Ray's own messages look like on a console: none may reach hwprof's."""


def scratch_left(cluster: LocalCluster, timeout: float = 60) -> list[str]:
    """The points' scratch folders still in the nodes' TMPDIR after up to `timeout` s (a keeper removes its own)."""
    end = time.monotonic() + timeout
    while (left := sorted(p.name for p in cluster.scratch.glob("hwprof-point-*"))) and time.monotonic() < end:
        time.sleep(0.5)
    return left


@pytest.fixture
def cluster(ray_cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with two measuring nodes."""
    return ray_cluster.measuring(2)


def read_until(proc: subprocess.Popen[str], needle: str, lines: list[str], timeout: float = 240) -> str:
    assert proc.stdout is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} never came:\n" + "".join(lines))


def finish(proc: subprocess.Popen[str], lines: list[str], timeout: float = 300) -> tuple[int, str]:
    rest, _ = proc.communicate(timeout=timeout)
    lines.append(rest)
    return proc.returncode, "".join(lines)


def rows(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "sweep.json").read_text())["rows"])


@pytest.fixture(scope="module")
def cluster_sweep(ray_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, float]:
    cluster = ray_cluster.measuring(2)
    out = tmp_path_factory.mktemp("ray") / "sweep"
    started = time.monotonic()
    proc = sweep_cli(cluster.address, out, *POINT_ARGS, *TWO_POINTS, *COLLECT_ARGS)
    code, text = finish(proc, [])
    assert code == 0, text
    return out, text, time.monotonic() - started


def test_each_point_on_a_node_of_its_own(cluster_sweep: tuple[Path, str, float]) -> None:
    out, text, wall = cluster_sweep
    found = rows(out)
    assert [(r["model"], r["threads"], r["batch"], r["status"]) for r in found] == [
        ("yolov8n", 1, 1, "complete"),
        ("yolov8n", 1, 2, "complete"),
    ]
    transfers = json.loads((out / "ray_transfer.json").read_text())
    nodes = {t["point"]: t["node_id"] for t in transfers}
    assert len(set(nodes.values())) == 2, nodes  # both nodes worked at once: one point each
    for r in found:
        run_dir = out / Path(r["run_dir"]).name
        assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
        assert (run_dir / "passes" / "timing" / "markers.jsonl").is_file()
        assert (out / f"{run_dir.name}.log").read_text().strip()
        assert r["host"] and r["cores"] and r["versions"]["torch"]
    assert all(t["archive_bytes"] > 0 and t["files"] > 3 for t in transfers)
    assert "running on node" in text and "Ray cluster" in text and "run directories shipped back: 2" in text
    for r in found:  # one attempt each, on the node that shipped the run back
        (attempt,) = r["attempts"]
        assert attempt["outcome"] == "finished" and attempt["end"] > attempt["start"] > 0
        assert r["node_id"] == attempt["node_id"] == nodes[Path(r["run_dir"]).name]
    assert (out / "sweep.csv").read_text().count("\n") == 3
    shipped = sum(t["archive_bytes"] for t in transfers)
    moving = sum(t["pack_s"] + t["fetch_s"] + t["unpack_s"] for t in transfers)
    print(f"\ncluster sweep: 2 points, 2 nodes, {wall:.1f} s wall (CLI start to end), {shipped / 1e3:.1f} kB shipped, "
          f"{moving:.3f} s packing+fetching+unpacking ({moving / wall:.2%} of the wall time)")  # fmt: skip


def test_same_rows_locally_and_on_the_cluster(cluster_sweep: tuple[Path, str, float], tmp_path: Path) -> None:
    """The cluster sweep's batch-2 row against a local sweep of that one point: equal but for the measured
    figures, where it ran and the host. One point here, not both: the other differs only by its batch (and the
    cluster rows' order and run folders are test_each_point_on_a_node_of_its_own's); a second local collect took
    half the test's time."""
    out, _, _ = cluster_sweep
    local = tmp_path / "local"
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "sweep", "--out", str(local), *POINT_ARGS, "--threads", "1",
         "--batch", "2", *COLLECT_ARGS],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def comparable(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k not in MEASURED | HOST_COLUMNS | RUN_FACTS}

    on_cluster, (here,) = rows(out), rows(local)
    assert comparable(on_cluster[1]) == comparable(here)
    assert here["batch"] == 2 and here["gflops"] and here["params_m"] and here["intensity"]
    assert {r["host_kind"] for r in on_cluster} == {here["host_kind"]}  # one machine: one kind


def test_interrupt_then_resume_runs_only_the_missing_points(cluster: LocalCluster, tmp_path: Path) -> None:
    """Ctrl-C after the first point finished: exit 130, the finished run kept, the running collects stopped;
    --resume DIR then runs only the points that did not finish, on the cluster the sweep recorded."""
    out = tmp_path / "sweep"
    proc = sweep_cli(cluster.address, out, *POINT_ARGS, "--threads", "1", "--batch", "1,2,3", *TIMING_ARGS)
    lines: list[str] = []
    read_until(proc, ": complete on", lines)
    # the third point starts once a node is free: the stop comes when it runs too, so that every point that did
    # not finish was running (a stop in the instant before it started left it with no attempt: a flaky failure)
    while sum("running on node" in line for line in lines) < 3:
        read_until(proc, "running on node", lines)
    proc.send_signal(signal.SIGINT)
    code, text = finish(proc, lines)
    assert code == 130, text
    done = [r for r in rows(out) if r["status"] == "complete"]
    assert 1 <= len(done) < 3, text
    notes = json.loads((out / "sweep.json").read_text())["notes"]
    assert any(n.startswith("interrupted:") for n in notes)
    # the table of what finished, then the exact command (before: "interrupted (SIGINT)" and nothing else)
    flat = " ".join(text.split())  # the table's title wraps where the folder's path is long
    assert f"sweep ({len(rows(out))} points) in {out}" in flat and "┃ model" in text, text
    assert text.rstrip().endswith(f"to run the points that did not finish: hwprof sweep --resume {out}"), text
    unfinished = [r for r in rows(out) if r["status"] != "complete"]
    assert all(r["status"] == "interrupted" and r["attempts"] for r in unfinished), unfinished
    first_transfers = json.loads((out / "ray_transfer.json").read_text())
    end = time.monotonic() + 20
    while any(collect_pids(cluster.scratch, f"yolov8n-t1-b{b}") for b in (1, 2, 3)) and time.monotonic() < end:
        time.sleep(0.5)
    assert not any(collect_pids(cluster.scratch, f"yolov8n-t1-b{b}") for b in (1, 2, 3)), "a cancelled collect lived on"
    assert not scratch_left(cluster), "a point's scratch folder was left on a node"
    kept = [r for r in rows(out) if r["status"] == "interrupted" and (out / Path(r["run_dir"]).name).is_dir()]
    for r in kept:  # a running point stopped by Ctrl-C: its run came back, finalised as interrupted
        assert json.loads((out / Path(r["run_dir"]).name / "run.json").read_text())["status"] == "interrupted"

    again = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "sweep", "--resume", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    names = {Path(r["run_dir"]).name for r in done}
    ran = {line.split(":")[0].split()[-1] for line in again.stdout.splitlines() if "running on node" in line}
    reused = {line.split(":")[0].split()[-1] for line in again.stdout.splitlines() if "reusing the complete" in line}
    assert reused == names and ran == {f"yolov8n-t1-b{b}" for b in (1, 2, 3)} - names, again.stdout
    assert [r["status"] for r in rows(out)].count("reused") == len(names)
    assert all(r["status"] in ("complete", "reused") for r in rows(out))
    transfers = json.loads((out / "ray_transfer.json").read_text())  # appended, not overwritten
    assert transfers[: len(first_transfers)] == first_transfers and len(transfers) == len(first_transfers) + len(ran)


def test_the_address_check_on_a_real_cluster(ray_cluster: LocalCluster) -> None:
    from hwprof.sweep.ray_connect import check_gcs

    assert check_gcs(ray_cluster.address) == ray.__version__


def test_a_killed_node_is_retried_elsewhere(cluster: LocalCluster, tmp_path: Path) -> None:
    """Two points on two nodes; the node running the first dies. Ray runs that point again on the other node
    (or the row says why it failed), the second point completes, and the killed collect does not live on."""
    out = tmp_path / "sweep"
    proc = sweep_cli(cluster.address, out, *POINT_ARGS, *TWO_POINTS, *TIMING_ARGS)
    lines: list[str] = []
    line = read_until(proc, "[1/2] yolov8n-t1-b1: running on node", lines)
    prefix = line.rsplit("(", 1)[1].split(")")[0]
    victim = next(n for n in cluster.worker_nodes if n.node_id.startswith(prefix))
    pids: list[int] = []
    end = time.monotonic() + 30
    while not pids and time.monotonic() < end:
        pids = collect_pids(cluster.scratch, "yolov8n-t1-b1")
        time.sleep(0.2)
    assert len(pids) == 1, pids
    cluster.kill_node(victim)  # the session's: not started again (a test that needs two nodes does)
    gone = psutil.wait_procs([psutil.Process(pids[0])], timeout=20)[0]
    assert [p.pid for p in gone] == pids, "the collect of the killed node lived on"
    code, text = finish(proc, lines)
    assert not scratch_left(cluster), "a point's scratch folder was left on a node"
    found = {r["batch"]: r for r in rows(out)}
    print(f"\nkilled node {victim.node_id[:8]}: the point it ran is {found[1]['status']}: {found[1]['error']}")
    assert found[2]["status"] == "complete", text
    # Ray's messages about the death (about 40 lines, twice, before) are in the sweep's folder, not here
    assert not [line for line in text.splitlines() if any(m in line for m in RAY_CONSOLE_MARKS)], text
    assert "Raylet is terminated" in (out / "ray_logs" / "driver.log").read_text()
    notes = json.loads((out / "sweep.json").read_text())["notes"]
    (cluster_note,) = [n for n in notes if n.startswith("Ray cluster")]
    assert "2 nodes at the start (" in cluster_note and f"; node {victim.node_id[:8]} (" in cluster_note
    assert " left at " in cluster_note and cluster_note.endswith("; 1 at the end"), cluster_note
    first = found[1]["attempts"][0]
    assert first["node_id"] == victim.node_id and first["outcome"].startswith(("lost", "failed")), first
    if found[1]["status"] == "complete":
        assert "yolov8n-t1-b1: running again on node" in text, text
        transfers = {t["point"]: t["node_id"] for t in json.loads((out / "ray_transfer.json").read_text())}
        assert transfers["yolov8n-t1-b1"] != victim.node_id
        assert code == 0, text
        second = found[1]["attempts"][1]
        assert len(found[1]["attempts"]) == 2 and second["outcome"] == "finished"
        assert found[1]["node_id"] == second["node_id"] == transfers["yolov8n-t1-b1"]
        assert first["outcome"] == "lost: its node left the cluster", first
        assert "yolov8n-t1-b1: 2 attempts: node " in " ".join(text.split())  # the table's notes
        with open(out / "sweep.csv") as f:
            assert sorted(r["attempts"] for r in csv.DictReader(f)) == ["1", "2"]
    else:
        assert found[1]["status"] == "failed" and found[1]["error"], text
        assert code == 1


def test_refusals_per_host_and_a_lost_kind(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    """A --hosts kind that no node is, a --per-host sweep, a point whose only node of its kind dies (failed with
    the reason, not waiting forever), and then a cluster where no node declares the resource (its head). The
    per-host sweep's point also finds a scratch folder that a gone point left on its node (its lock free): it
    removes it, and the sweep's notes say so (here, where a point runs anyway, instead of a sweep of its own)."""
    cluster = ray_cluster.measuring(1)
    (measuring,) = cluster.worker_nodes
    proc = sweep_cli(cluster.address, tmp_path / "s", *POINT_ARGS, "--per-host", "--hosts", "graviton9")
    code, text = finish(proc, [])
    text = " ".join(text.split())
    assert code == 2 and "--hosts 'graviton9': no node of the cluster is of that kind; kinds:" in text, text
    assert not (tmp_path / "s").exists()

    from hwprof.core.config import default_threads
    from hwprof.core.host import cpu_model

    stale = cluster.scratch / "hwprof-point-99-gone"
    stale.mkdir()
    (stale / ".keeper.lock").write_text("")
    (stale / "run.json").write_text('{"status": "running"}')
    out = tmp_path / "per-host"
    proc = sweep_cli(cluster.address, out, *POINT_ARGS, "--per-host", "--hosts", cpu_model(), *TIMING_ARGS)
    code, text = finish(proc, [])
    assert code == 0, text
    (row,) = rows(out)
    assert Path(row["run_dir"]).parent.name == row["host_slug"] and row["status"] == "complete"
    # no --threads: the point's collect used the node's own thread count, and its row says which
    # (the driver's count went to every node before)
    run_json = out / row["host_slug"] / "yolov8n-tnode-b1" / "run.json"
    assert run_json.is_file() and "--threads" not in json.loads(run_json.read_text())["command"]
    assert int(row["threads"]) == default_threads()
    assert json.loads((out / "sweep_plan.json").read_text())["ray"]["per_host"] is True
    notes = json.loads((out / "sweep.json").read_text())["notes"]
    assert any("removed 1 scratch folders" in n and "hwprof-point-99-gone" in n for n in notes), notes
    assert not stale.exists()

    # the only measuring node dies while it runs the point: Ray would keep the retry waiting for a node
    lost = tmp_path / "lost"
    proc = sweep_cli(cluster.address, lost, *POINT_ARGS, *TIMING_ARGS)
    lines: list[str] = []
    read_until(proc, "running on node", lines)
    cluster.kill_node(measuring)
    code, text = finish(proc, lines, timeout=120)
    (row,) = rows(lost)
    assert code == 1 and row["status"] == "failed", text
    assert row["error"] == "every node that could run it (any kind) has left the cluster", text

    assert not cluster.worker_nodes  # the head alone, which declares no resource
    proc = sweep_cli(cluster.address, tmp_path / "s", *POINT_ARGS, *TIMING_ARGS)
    code, text = finish(proc, [])
    text = " ".join(text.split())
    assert code == 2 and "none declares the resource 'hwprof'" in text and "--resources" in text, text
