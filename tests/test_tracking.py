"""Runs logged to MLflow (issue 60), read back through MLflow's own client: the figures a run gives, the embedded
SQLite store, a real `mlflow server` on a local port (a collect, a two-point sweep, an advise), logging twice as one
run, and each store that cannot take a run: one line, the run kept, exit 3. No mock of MLflow."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hwprof.tracking.run_figures import RUN_ID_TAG, run_figures

mlflow = pytest.importorskip("mlflow", reason="MLflow is not installed: pip install -c constraints.txt '.[track]'")

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
ADVISED = Path(__file__).parent / "fixtures" / "gpu_run_yolov8n"
TINY = ("--model", "yolov8n", "--imgsz", "64", "--iters", "2", "--warmup", "1", "--no-report")


def hwprof(*words: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hwprof", *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def hwprof_here(
    capfd: pytest.CaptureFixture[str], *words: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`hwprof WORDS` run in this process (`hwprof.cli.main.main`, what `python -m hwprof` runs), its output
    read from the file descriptors: MLflow is imported here already, where each `hwprof track` process imports it
    again (2 to 4 CPU-s). The environment is restored after (the store sets MLflow's HTTP limits in it)."""
    from hwprof.cli.main import main

    saved = dict(os.environ)
    os.environ.update(env)
    capfd.readouterr()
    try:
        code = main(list(words))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["hwprof", *words], code, out, err)


def copy_run(src: Path, dest: Path, run_id: str) -> Path:
    shutil.copytree(src, dest)
    doc = json.loads((dest / "run.json").read_text())
    doc["run_id"] = run_id
    (dest / "run.json").write_text(json.dumps(doc))
    return dest


def runs_of(uri: str) -> list[Any]:
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("hwprof")
    return list(client.search_runs([experiment.experiment_id])) if experiment is not None else []


def test_a_runs_figures_are_its_own_files_figures() -> None:
    """The run's summary.json as `hwprof report` writes it (the fixture's files were never rendered: it is made
    from the analysis) gives the metrics; run.json the parameters and tags."""
    figures = run_figures(FIXTURE)
    summary = json.loads(figures.texts["summary.json"])
    assert summary["run_id"] == json.loads((FIXTURE / "run.json").read_text())["run_id"]
    forward = next(r for r in summary["stages"]["rows"] if r["name"] == "forward")
    assert figures.metrics["stage.forward.p50_ms"] == forward["p50_ms"]
    top = [r for r in summary["layers"]["rows"] if r["depth"] == 1]
    assert figures.metrics[f"layer.{top[0]['name']}.time_ms"] == top[0]["time_ms"]
    assert sum(1 for k in figures.metrics if k.endswith(".share")) == len(top)
    run = json.loads((FIXTURE / "run.json").read_text())
    assert figures.params["model"] == run["model"]["name"] and figures.params["imgsz"] == str(run["config"]["imgsz"])
    assert figures.params["passes"] == ",".join(run["passes"])
    assert figures.tags[RUN_ID_TAG] == run["run_id"] and figures.tags["status"] == run["status"]
    assert set(figures.texts) == {"summary.json", "layers.csv"} and figures.texts["layers.csv"].startswith("index,")
    assert "trace.pftrace" not in {p.name for p in figures.artifacts}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, str]:
    """A plain run and an advised one logged by one `hwprof track` into the embedded store (each `hwprof track`
    imports MLflow: 2 to 4 CPU-s): (the plain run, the advised run, the results folder, the store's URI)."""
    root = tmp_path_factory.mktemp("embedded")
    run = copy_run(FIXTURE, root / "run", "embedded-1")
    advised = copy_run(ADVISED, root / "advised", "advised-1")
    results = root / "results"
    done = hwprof("track", str(run), str(advised), "--results", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"mlflow ui --backend-store-uri sqlite:///{results.resolve()}/mlflow.db" in done.stdout
    return run, advised, results, f"sqlite:///{results.resolve()}/mlflow.db"


@pytest.mark.slow
def test_the_embedded_store_takes_a_run_once_and_gives_it_back(
    embedded: tuple[Path, Path, Path, str], capfd: pytest.CaptureFixture[str]
) -> None:
    run, advised, results, uri = embedded
    again = hwprof_here(capfd, "track", str(run), "--results", str(results), env={})
    assert again.returncode == 0 and "nothing logged again" in again.stdout, again.stdout + again.stderr
    runs = runs_of(uri)
    (logged,) = [r for r in runs if r.data.tags[RUN_ID_TAG] == "embedded-1"]  # one MLflow run, however often logged
    rows = json.loads((advised / "advice.json").read_text())["rows"]
    assert len(runs) == 2 + len(rows)  # nothing else: the advised run and its rows (below), logged once
    figures = run_figures(run)
    assert logged.data.params == figures.params
    assert logged.data.metrics == pytest.approx(figures.metrics)
    assert logged.data.tags[RUN_ID_TAG] == "embedded-1" and logged.info.status == "FINISHED"
    names = {a.path for a in mlflow.MlflowClient(tracking_uri=uri).list_artifacts(logged.info.run_id)}
    assert names == {p.name for p in figures.artifacts} | set(figures.texts)
    assert (results / "mlartifacts").is_dir()


@pytest.mark.slow
def test_a_runs_advice_rows_are_its_child_runs(embedded: tuple[Path, Path, Path, str]) -> None:
    _, run, _, uri = embedded
    runs = runs_of(uri)
    (parent,) = [r for r in runs if r.data.tags[RUN_ID_TAG] == "advised-1"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    rows = json.loads((run / "advice.json").read_text())["rows"]
    assert sorted(c.data.params["key"] for c in children) == sorted(r["key"] for r in rows)
    first = next(c for c in children if c.data.params["key"] == rows[0]["key"])
    assert first.data.metrics["forward.ratio"] == pytest.approx(rows[0]["forward"]["ratio"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `mlflow server` with a temporary SQLite store on a free local port."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    mlflow_cli = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    command = [
        mlflow_cli, "server", "--backend-store-uri", f"sqlite:///{root}/store.db", "--host", "127.0.0.1",
        "--artifacts-destination", str(root / "artifacts"),  # not ./mlartifacts in the tests' folder
    ]  # fmt: skip
    log = open(root / "server.log", "w")  # noqa: SIM115 - kept open for the server's life
    # without MLflow's job execution (a job runner and its huey consumers, each importing mlflow: minutes of CPU
    # on 2 CPUs before the first request), which no hwprof command uses: the tracking API is the same server's
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.mark.slow
def test_a_collect_a_sweep_and_an_advise_land_on_a_real_server(server: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a password in the URI (the server takes any): never printed nor kept (issue 67: printed twice, and stored in
    # run.json's command and the trace)
    secret = server.replace("http://", "http://someone:s3cret@")
    done = hwprof("collect", *TINY, "--only", "timing", "--out", str(out), "--track", secret)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = server.replace("http://", "http://someone:***@")
    assert f"in {shown}" in done.stdout and f"open {shown} in a browser" in done.stdout, done.stdout[-2000:]
    kept = [p for p in out.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert "s3cret" not in done.stdout + done.stderr and not kept, kept
    assert shown in " ".join(json.loads((out / "run.json").read_text())["command"])
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    (logged,) = [r for r in runs_of(server) if r.data.tags[RUN_ID_TAG] == run_id]
    run = json.loads((out / "run.json").read_text())
    assert logged.data.metrics["stage.forward.p50_ms"] == pytest.approx(run["stages"]["forward"]["p50_ms"])
    assert logged.data.params["imgsz"] == "64" and logged.data.tags["status"] == "complete"
    client = mlflow.MlflowClient(tracking_uri=server)
    assert "report.html" in {a.path for a in client.list_artifacts(logged.info.run_id)}
    # the sweep's two points: this collect's run again, as its t1 and t2 points (each a run of its own), which the
    # sweep reuses as it resumes a sweep: its own collects of them cost two collects' CPU and test nothing of MLflow
    sweep_out = tmp_path / "sweep"
    for threads in (1, 2):
        point = copy_run(out, sweep_out / f"yolov8n-t{threads}-b1", f"point-t{threads}")
        doc = json.loads((point / "run.json").read_text())
        doc["config"]["threads"] = threads
        (point / "run.json").write_text(json.dumps(doc))

    advise = hwprof("advise", str(out), "--only", "malloc-keep", "--blocks", "2", "--no-layers", "--track", server)
    assert advise.returncode == 0, advise.stdout[-2000:] + advise.stderr[-2000:]
    assert "was logged before" in advise.stdout
    children = [r for r in runs_of(server) if r.data.tags.get("mlflow.parentRunId") == logged.info.run_id]
    assert [c.data.params["key"] for c in children] == ["malloc-keep"]

    sweep = hwprof(
        "sweep", "--models", "yolov8n", "--threads", "1,2", "--imgsz", "64", "--iters", "2",
        "--out", str(sweep_out), "--track", server, "--", "--only", "timing",
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-2000:]
    runs = runs_of(server)
    (parent,) = [r for r in runs if r.data.tags[RUN_ID_TAG] == f"sweep:{sweep_out.resolve()}"]
    points = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(p.data.params["threads"] for p in points) == ["1", "2"]
    assert sorted(p.data.tags[RUN_ID_TAG] for p in points) == ["point-t1", "point-t2"]
    assert parent.data.params["threads"] == "1,2"
    assert "reusing the complete run" in sweep.stdout, sweep.stdout[-2000:]  # no point collected again


def _silent_port() -> tuple[int, threading.Event]:
    """A port that accepts connections and never answers (a store that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue
        listener.close()

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1]), stop


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    """Until something accepts connections on `port` (`proc`, started to listen there)."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"nothing listens on port {port} (exit {proc.poll()})")


@pytest.mark.slow
def test_a_store_that_refuses_hangs_or_is_not_mlflow_keeps_the_run_and_says_how_to_log_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each `hwprof track` process imports MLflow (2 to 4 CPU-s): the refused store is the one with a password in
    its URI, given by option, and again by $MLFLOW_TRACKING_URI, each in a process of its own (all it prints, its
    warnings and log records too, is read for the password); the hanging one answers nothing within 1 s (MLflow
    tries twice) and the one that is not MLflow answers 404: these two, with no password, run in this process."""
    run = copy_run(FIXTURE, tmp_path / "run", "kept-1")
    before = sorted((p.relative_to(run), p.stat().st_size) for p in run.rglob("*"))
    hang, stop = _silent_port()
    web_port = _free_port()  # a web server that is not MLflow: 404 for MLflow's API
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(web_port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    refused = f"http://someone:s3cret@127.0.0.1:{_free_port()}"
    try:
        cases = [
            (refused, "nothing answers there (connection refused)"),
            (f"http://127.0.0.1:{hang}", "no answer within 1 s (timed out)"),
            (f"http://127.0.0.1:{web_port}", "answered HTTP 404: not an MLflow tracking server"),
        ]
        for uri, said in cases:
            if uri.endswith(f":{web_port}"):
                _wait_listening(web_port, web)
            shown = uri.replace(":s3cret@", ":***@")  # the password masked in the command that logs them later
            env = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "1"}
            if uri == refused:
                done = hwprof("track", str(run), "--uri", uri, env=env, timeout=120)
            else:
                done = hwprof_here(capfd, "track", str(run), "--uri", uri, env=env)
            assert done.returncode == 3, done.stdout + done.stderr
            assert said in done.stdout and f"`hwprof track {run} --uri {shown}` logs them later" in done.stdout, (
                done.stdout
            )
            assert "s3cret" not in done.stdout + done.stderr, done.stdout + done.stderr
    finally:
        stop.set()
        web.terminate()
        web.wait(timeout=10)
    assert sorted((p.relative_to(run), p.stat().st_size) for p in run.rglob("*")) == before
    done = hwprof("track", str(run), env={"MLFLOW_TRACKING_URI": refused}, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 3 and "connection refused" in said and "s3cret" not in said, said
    assert "http://someone:***@127.0.0.1" in said, said
    # an SQLite file in a folder nobody can write (/proc, even for root): one line before MLflow's retries (about
    # 100 s and 36 warnings before); a folder as the store, which MLflow 3.7+ refuses: said before the collect runs
    unwritable = hwprof("track", str(run), "--uri", "sqlite:////proc/hwprof-store.db", timeout=60)
    said = unwritable.stdout + unwritable.stderr
    assert unwritable.returncode == 3 and "/proc cannot be written" in said and "retried" not in said, said[-2000:]
    folder = hwprof("collect", *TINY, "--track", f"file://{tmp_path / 'store'}", "--out", str(tmp_path / "never"))
    assert folder.returncode == 2 and "MLflow no longer takes a folder as a store" in folder.stderr, folder.stderr
    assert len(folder.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()
    bad = hwprof("collect", *TINY, "--track", "nonsense://x", "--out", str(tmp_path / "never"))
    assert bad.returncode == 2 and "'nonsense://x' is no tracking URI MLflow takes" in bad.stderr, bad.stderr
    assert not (tmp_path / "never").exists()  # refused before anything ran
