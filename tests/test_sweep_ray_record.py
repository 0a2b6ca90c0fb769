"""The pure parts of a cluster sweep's record, without a cluster: the address check against servers that are
not Ray, the attempts and node changes, the row's attempts in sweep.json / sweep.csv / the table, Ray's
messages kept in a file, the transfer record kept on --resume."""

from __future__ import annotations

import csv
import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from rich.console import Console

from hwprof.analysis.sweep.rows import SweepResult, SweepRow, load_sweep
from hwprof.render.compare.views import render_sweep
from hwprof.sweep.points import resume_command, write_sweep
from hwprof.sweep.ray_record import LOST, NODE_LEFT, RUNNING, SweepRecord

T0 = 1_700_000_000.0


def _serve(handle: str) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts and never answers ("silent") or closes at once ("close")."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def loop() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            if handle == "close":
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    """No request log: SimpleHTTPRequestHandler writes one line per request to this process's stderr, which
    the command-line tests read for hwprof's error line."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    yield from _serve("silent")


@pytest.fixture
def closing_server() -> Iterator[str]:
    yield from _serve("close")


def test_an_address_that_is_not_a_ray_gcs_is_refused(http_server: str, silent_server: str, closing_server: str) -> None:
    """Before: the 5 s TCP check passed for all three and ray.init retried them for minutes."""
    pytest.importorskip("ray")
    pytest.importorskip("grpc")
    from hwprof.sweep.ray_connect import check_gcs

    with pytest.raises(ValueError, match=r"no Ray cluster at .*: what listens there is not a Ray GCS \(.*HTTP/2"):
        check_gcs(http_server)
    with pytest.raises(ValueError, match=r"something accepts connections there but did not answer as a Ray GCS"):
        check_gcs(silent_server, timeout_s=0.5)
    with pytest.raises(ValueError, match=r"no Ray cluster at .*: what listens there is not a Ray GCS"):
        check_gcs(closing_server)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ValueError, match=r"nothing listens there \(connection refused\); start one with `ray start"):
        check_gcs(free)
    with pytest.raises(ValueError, match=r"give HOST:PORT"):
        check_gcs("nohost")


def test_auto_is_checked_too(closing_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--ray auto resolves as ray.init would (RAY_ADDRESS here) and the address found is checked."""
    pytest.importorskip("ray")
    from hwprof.sweep.ray_connect import connect

    monkeypatch.setenv("RAY_ADDRESS", closing_server)
    port = closing_server.rsplit(":", 1)[1]
    with pytest.raises(ValueError, match=rf"no Ray cluster at [0-9.]+:{port}: "):  # Ray puts this node's IP in
        connect("auto")


def test_attempts_and_node_changes() -> None:
    record = SweepRecord({"aaaa1111node": "vm1", "bbbb2222node": "vm2"})
    names = {1: "yolov8n-t1-b1", 2: "yolov8n-t2-b1"}
    assert record.started(1, "aaaa1111node", "vm1", T0) == 1
    assert record.started(2, "bbbb2222node", "vm2", T0 + 1) == 1
    # point 1 starts again on the other node before the driver sees its first node gone: lost
    assert record.started(1, "bbbb2222node", "vm2", T0 + 20) == 2
    first = record.attempts[1][0]
    assert (first.end, first.outcome) == (T0 + 20, LOST)
    # then the node is seen gone: the lost attempt is put down to it, and the change is recorded
    (change,) = record.nodes_now({"bbbb2222node"}, T0 + 25, names, {"bbbb2222node": "vm2"})
    assert change.left and change.node_id == "aaaa1111node" and change.running == []
    assert first.outcome == NODE_LEFT
    record.returned(1, "bbbb2222node", "vm2", T0 + 20.5, T0 + 40, "finished")
    record.returned(2, "bbbb2222node", "vm2", T0 + 1, T0 + 30, "finished")
    assert [a.outcome for a in record.attempts[1]] == [NODE_LEFT, "finished"]
    assert record.attempts[1][1].start == T0 + 20.5
    assert record.last_node(1) == "bbbb2222node"
    note = record.node_note("1.2.3.4:6379", "AMD x2")
    assert note.startswith("Ray cluster 1.2.3.4:6379: 2 nodes at the start (AMD x2); node aaaa1111 (vm1) left at ")
    assert note.endswith("; 1 at the end")
    # a node that dies while running a point: named in the change; Ray's final error ends the attempt
    record.started(3, "bbbb2222node", "vm2", T0 + 50)
    (gone,) = record.nodes_now(set(), T0 + 60, {**names, 3: "p3"}, {})
    assert gone.running == ["p3"] and "while running p3" in gone.text()
    record.ended(3, "failed: NodeDiedError", T0 + 61)
    assert record.attempts[3][0].outcome == "failed: NodeDiedError" and record.attempts[3][0].end == T0 + 61
    # a new node joins
    (joined,) = record.nodes_now({"cccc3333node"}, T0 + 70, names, {"cccc3333node": "vm3"})
    assert not joined.left and joined.host == "vm3" and "joined" in joined.text()
    # a return whose start the driver never saw still makes an attempt
    record.returned(4, "cccc3333node", "vm3", T0 + 71, T0 + 80, "finished")
    assert [(a.node_id, a.outcome) for a in record.attempts[4]] == [("cccc3333node", "finished")]
    assert record.attempts[2][0].outcome != RUNNING


def _row(tmp_path: Path, name: str, attempts: list[dict[str, object]]) -> SweepRow:
    return SweepRow("yolov8n", 1, 1, str(tmp_path / name), "complete", node_id="bbbb2222node", attempts=attempts)


def test_a_retried_row_shows_its_attempts(tmp_path: Path) -> None:
    tries = [
        {"node_id": "aaaa1111node", "host": "vm1", "start": T0, "end": T0 + 20, "outcome": NODE_LEFT},
        {"node_id": "bbbb2222node", "host": "vm2", "start": T0 + 20, "end": T0 + 40, "outcome": "finished"},
    ]
    once = [{"node_id": "bbbb2222node", "host": "vm2", "start": T0, "end": T0 + 9, "outcome": "finished"}]
    result = SweepResult([_row(tmp_path, "p1", tries), _row(tmp_path, "p2", once)], tmp_path, [], ["a note"])
    result.resume = resume_command(tmp_path)
    write_sweep(result)
    with open(tmp_path / "sweep.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["attempts"] for r in table] == ["2", "1"] and table[0]["node_id"] == "bbbb2222node"
    back = load_sweep(tmp_path)
    assert back.rows[0].attempts == tries and back.rows[0].node_id == "bbbb2222node"
    assert back.resume == f"hwprof sweep --resume {tmp_path}"
    console = Console(record=True, width=200)
    render_sweep(back, console)
    text = console.export_text()
    assert "┃ attempts ┃" in text  # the column
    assert "p1: 2 attempts: node aaaa1111 (vm1) " in text and f"{NODE_LEFT}; node bbbb2222 (vm2) " in text
    assert "p2: 1 attempts" not in text


def test_resume_command_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resume_command(Path("my sweep")) == f"hwprof sweep --resume '{tmp_path / 'my sweep'}'"


def test_rays_messages_go_to_the_sweep_folder(tmp_path: Path) -> None:
    """What Ray writes to descriptor 2 and what its error subscriber prints land in ray_logs/driver.log."""
    pytest.importorskip("ray")
    import ray._private.worker as ray_worker

    from hwprof.sweep.ray_logs import RayLogs

    original = ray_worker.print_to_stdstream
    logs = RayLogs().start()
    try:
        os.write(2, b"before the folder\n")
        ray_worker.print_to_stdstream({"lines": ["Raylet is terminated"], "pid": "raylet", "is_err": False}, False)
        path = logs.move_to(tmp_path)
        os.write(2, b"after\n")
    finally:
        kept = logs.stop()
    assert kept == path == tmp_path / "ray_logs" / "driver.log"
    assert path.read_text() == "before the folder\n(raylet) Raylet is terminated\nafter\n"
    assert ray_worker.print_to_stdstream is original
    empty = RayLogs().start()
    temp = empty.path
    assert empty.stop() is None and temp is not None and not temp.exists()  # nothing written: nothing left


def test_resume_appends_to_the_transfer_record(tmp_path: Path) -> None:
    from hwprof.rundir.sweep_files import read_transfers

    (tmp_path / "ray_transfer.json").write_text(json.dumps([{"point": "a"}]))
    assert read_transfers(tmp_path) == [{"point": "a"}]
    (tmp_path / "ray_transfer.json").write_text("{not json")
    assert read_transfers(tmp_path) == []
    assert (tmp_path / "ray_transfer.json.unreadable").read_text() == "{not json"
    assert read_transfers(tmp_path / "missing") == []


def test_the_cli_refuses_an_http_server_in_one_line(
    http_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray")
    from hwprof.cli.main import main

    argv = ["sweep", "--models", "yolov8n", "--imgsz", "64", "--out", str(tmp_path / "s"), "--ray", http_server]
    assert main(argv) == 2
    out = capsys.readouterr().err
    assert out.startswith(f"hwprof: error: no Ray cluster at {http_server}: what listens there is not a Ray GCS")
    assert len(out.strip().splitlines()) == 1, out
    assert not (tmp_path / "s").exists()


def test_ray_init_is_bounded() -> None:
    """ray.init can block inside Ray's C++ GCS client, where no signal reaches it: it gets a deadline."""
    from hwprof.sweep.ray_connect import JoinError, _init_within

    release = threading.Event()

    class Blocking:
        def init(self, **_kwargs: object) -> None:
            release.wait(30)

    class Refusing:
        def init(self, **_kwargs: object) -> None:
            raise ConnectionError("Could not find any running Ray instance.\nmore")

    try:
        with pytest.raises(JoinError, match=r"answered, but joining it \(ray\.init\) did not finish within 0 s"):
            _init_within(Blocking(), "1.2.3.4:6379", 0.2, None)
    finally:
        release.set()
    with pytest.raises(JoinError, match=r"no Ray cluster at 1.2.3.4:6379: ConnectionError: Could not find any"):
        _init_within(Refusing(), "1.2.3.4:6379", 5, None)


def test_a_refusals_temporary_log_is_removed() -> None:
    pytest.importorskip("ray")
    from hwprof.sweep.ray_logs import RayLogs

    logs = RayLogs().start()
    os.write(2, b"SIGTERM handler is not set\n")
    temp = logs.path
    assert logs.stop(keep=False) is None and temp is not None and not temp.exists()
