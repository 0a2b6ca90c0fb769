"""Video in, video out (issue 41): the reader, the writers, the output check, the pipeline's decode, annotate and
encode stages, the session keeping one pass's output, and the report's lines. Every clip is written here with
cv2.VideoWriter (mp4v)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.workload.annotate import ImageSink, VideoSink, check_target, draw_detections, pass_output
from hwprof.workload.images import ImageError, discover, is_video_input
from hwprof.workload.video import VideoError, VideoReader, frame_sizes, probe_video

W, H = 160, 120


def write_clip(
    path: Path, frames: int, size: tuple[int, int] = (W, H), fourcc: str = "mp4v", noise: bool = False
) -> Path:
    """A clip whose frame k is filled with grey level 20k (so a frame read back can be told from another) and a
    square that moves; `noise`: random pixels shifted frame by frame instead, which keep the codec busy for
    milliseconds per frame (enough perf samples in decode and encode)."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 25.0, size)
    assert writer.isOpened()
    pixels = np.random.default_rng(0).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    for k in range(frames):
        if noise:
            frame = np.roll(pixels, 8 * k, axis=1)
        else:
            frame = np.full((size[1], size[0], 3), 20 * k, dtype=np.uint8)
            cv2.rectangle(frame, (5 * k, 10), (5 * k + 30, 40), (0, 255, 0), -1)
        writer.write(frame)
    writer.release()
    return path


def count_frames(path: Path) -> int:
    capture = cv2.VideoCapture(str(path))
    n = 0
    while capture.read()[0]:
        n += 1
    capture.release()
    return n


def grey(frame: np.ndarray) -> int:
    """A frame's fill level (its bottom-right corner, away from the square), to tell frames apart."""
    return round(frame[-5:, -5:].mean() / 20)


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    return write_clip(tmp_path / "clip.mp4", 5)


# ----------------------------------------------------------------------------- input


def test_probe_reads_size_frames_rate_and_codec(clip: Path) -> None:
    info = probe_video(clip, known_video=True)
    assert (info.width, info.height, info.frames, info.fps) == (W, H, 5, 25.0)
    assert info.codec == "FMP4" and info.backend == "FFMPEG"
    assert "clip.mp4 (160x120, 5 frames at 25 fps, FMP4)" in info.describe()


def test_discover_takes_a_video_file(clip: Path) -> None:
    images = discover(str(clip))
    assert images.paths == [clip.resolve()] and images.video is not None and images.video.frames == 5
    assert is_video_input(images.paths)
    assert not is_video_input(discover(None).paths)


def test_a_file_that_is_not_a_video_is_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake.mp4"
    fake.write_text("not a video at all\n")
    with pytest.raises(VideoError, match=r"^OpenCV cannot open the video .*fake\.mp4: damaged, or in a container"):
        discover(str(fake))
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(VideoError, match=r"notes\.txt is neither an image nor a video OpenCV can open$"):
        discover(str(other))


def test_a_codec_opencv_cannot_decode_is_one_line(tmp_path: Path) -> None:
    """An AVI whose stream says codec ZZZZ: FFmpeg reads the container, no decoder takes the stream."""
    good = write_clip(tmp_path / "good.avi", 3, fourcc="MJPG")
    bad = tmp_path / "bad.avi"
    bad.write_bytes(good.read_bytes().replace(b"MJPG", b"ZZZZ"))
    with pytest.raises(VideoError) as raised:
        discover(str(bad))
    message = str(raised.value)
    assert "bad.avi" in message and "codec" in message and "\n" not in message


def test_a_folder_of_videos_says_to_give_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "videos"
    folder.mkdir()
    write_clip(folder / "a.mp4", 2)
    with pytest.raises(ImageError, match=r"a video is given as the file itself \(--images .*a\.mp4\)"):
        discover(str(folder))


def joined_clip(path: Path, fourcc: str, sizes: tuple[tuple[int, int], ...] = ((W, H), (2 * W, 2 * H))) -> Path:
    """Clips of different frame sizes joined as a user joins them: byte after byte (`cat a.ts b.ts > ab.ts`, the
    MPEG-TS of a camera or a recorded stream; an MJPEG AVI likewise). FFmpeg decodes every frame of both, and
    OpenCV returned each at the first clip's size, rescaled without a word, with the first clip's frame count."""
    parts = [
        write_clip(path.with_name(f"part{k}{path.suffix}"), 10, size=size, fourcc=fourcc)
        for k, size in enumerate(sizes)
    ]
    path.write_bytes(b"".join(part.read_bytes() for part in parts))
    for part in parts:
        part.unlink()
    return path


@pytest.mark.parametrize(("name", "fourcc"), [("joined.ts", "mp4v"), ("joined.avi", "MJPG"), ("joined.mpg", "PIM1")])
def test_a_video_whose_frames_change_size_is_refused_with_the_sizes(tmp_path: Path, name: str, fourcc: str) -> None:
    joined = joined_clip(tmp_path / name, fourcc)
    shapes = set()
    capture = cv2.VideoCapture(str(joined))
    while (frame := capture.read()[1]) is not None:
        shapes.add(frame.shape[:2])
    capture.release()
    assert shapes == {(H, W)}, "OpenCV reads the second clip at the first one's size: the case refused here"
    with pytest.raises(VideoError) as raised:
        discover(str(joined))
    message = str(raised.value)
    assert f"{name} changes frame size: {W}x{H} up to frame 9, {2 * W}x{2 * H} from frame 10" in message, message
    assert "rescale" in message and "fix:" in message and "\n" not in message


def test_one_size_throughout_is_checked_and_passes(tmp_path: Path) -> None:
    for name, fourcc in (("one.ts", "mp4v"), ("one.avi", "MJPG"), ("one.mpg", "PIM1")):
        clip = joined_clip(tmp_path / name, fourcc, sizes=((W, H), (W, H)))
        info = discover(str(clip)).video
        assert info is not None and (info.width, info.height) == (W, H)
        assert frame_sizes(clip) == [(0, (W, H))]
    assert frame_sizes(write_clip(tmp_path / "plain.mp4", 3)) is None, "sizes in the mp4 header only: not checked"


def test_reader_gives_consecutive_frames_and_loops_at_the_end(clip: Path) -> None:
    reader = VideoReader(clip, batch=2)
    seen = [[grey(f) for f in reader.read_batch()] for _ in range(3)]
    assert seen == [[0, 1], [2, 3], [4, 0]]
    assert (reader.frames_read, reader.rewinds) == (6, 1)
    assert [grey(f) for f in reader.first_frames()] == [0, 1]
    assert [grey(f) for f in reader.read_batch()] == [1, 2], "first_frames() reads with its own capture"
    assert reader.frame_rate == 25.0
    reader.close()


# ----------------------------------------------------------------------------- output


def test_draw_detections_draws_each_box_and_label() -> None:
    import torch

    image = np.zeros((H, W, 3), dtype=np.uint8)
    draw_detections(image, torch.tensor([[20.0, 30.0, 80.0, 90.0, 0.9, 3.0]]))
    assert image[30, 50].any() and image[60, 20].any(), "the box's edges are drawn"
    assert not image[60, 50].any(), "its inside is not filled"
    assert not image[110, 150].any()


def test_video_sink_writes_a_video_that_reads_back(tmp_path: Path) -> None:
    sink = VideoSink(tmp_path / "out.mp4", fps=None)
    for k in range(4):
        sink.write([np.full((H, W, 3), 20 * k, dtype=np.uint8)], [])
    sink.close()
    assert sink.written == 4 and count_frames(sink.path) == 4
    capture = cv2.VideoCapture(str(sink.path))
    assert capture.get(cv2.CAP_PROP_FPS) == 30.0, "DEFAULT_FPS where the input states none"


def test_image_sink_writes_each_image_under_its_name(tmp_path: Path) -> None:
    sink = ImageSink(tmp_path / "out")
    frame = np.zeros((H, W, 3), dtype=np.uint8)
    sink.write([frame, frame], ["a.jpg", "b.png"])
    sink.write([frame], ["a.jpg"])
    assert sink.written == 3 and sorted(p.name for p in sink.path.iterdir()) == ["a.jpg", "b.png"]


def test_pass_output_is_in_the_pass_folder(tmp_path: Path) -> None:
    assert pass_output(tmp_path, Path("/x/out.MP4"), video=True) == tmp_path / "annotated.mp4"
    assert pass_output(tmp_path, Path("/x/out"), video=False) == tmp_path / "annotated"


def test_check_target_accepts_a_video_and_leaves_nothing_behind(tmp_path: Path, clip: Path) -> None:
    info = probe_video(clip, known_video=True)
    target = check_target(tmp_path / "out.avi", [clip], info)
    assert target.video and target.describe() == "a MJPG video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"], "the one-frame probe is removed"


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("missing/out.mp4", "the folder .*missing does not exist"),
        ("out.webm", r"a video output ends in one of \.mp4, \.m4v, \.mov, \.mkv, \.avi"),
        ("clip.mp4", "is the input video itself"),
        (".", "is a folder; a video input writes a video file"),
        ("/proc/hwprof-out.mp4", "OpenCV cannot write a mp4v video to"),
    ],
)
def test_check_target_refuses_what_cannot_be_written(tmp_path: Path, clip: Path, out: str, message: str) -> None:
    info = probe_video(clip, known_video=True)
    path = Path(out) if out.startswith("/") else tmp_path / out
    with pytest.raises(ValueError, match=message):
        check_target(path, [clip], info)


def test_check_target_for_images_wants_another_folder(tmp_path: Path, bus_images: list[Path]) -> None:
    assert not check_target(tmp_path / "annotated", bus_images, None).video
    with pytest.raises(ValueError, match="is where the images are read from"):
        check_target(bus_images[0].parent, bus_images, None)
    with pytest.raises(ValueError, match="is a video name, but the input is images"):
        check_target(tmp_path / "out.mp4", bus_images, None)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        check_target(tmp_path / "file", bus_images, None)


# ----------------------------------------------------------------------------- the pipeline


def _pipeline(inputs: Path | list[Path], out: Path | None, batch: int = 1) -> Any:
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.zoo import build_model

    config = RunConfig(model="yolov8n", imgsz=64, batch=batch, warmup=1, iters=2, threads=1)
    bus = MarkerBus()
    log = MarkerLog()
    bus.keep_spans(log)
    paths = inputs if isinstance(inputs, list) else [inputs]
    return Pipeline(config, bus, paths, build_model("yolov8n"), annotate_to=out), log


def test_pipeline_decodes_annotates_and_encodes(tmp_path: Path, clip: Path) -> None:
    out = tmp_path / "pass" / "annotated.mp4"
    out.parent.mkdir()
    pipeline, log = _pipeline(clip, out, batch=2)
    assert pipeline.sample_batch().shape == (2, 3, 64, 64)
    for i in (-1, 0, 1):
        pipeline.run_iteration(i, warmup=i < 0)
    pipeline.close()
    stages = [m.name for m in log.markers if m.kind == "stage" and m.phase == "B" and m.iteration == 0]
    assert stages == ["decode", "preprocess", "forward", "postprocess", "annotate", "encode"]
    assert (pipeline.video.frames_read, pipeline.video.rewinds) == (6, 1)
    assert pipeline.sink.written == 6 and count_frames(out) == 6
    assert pipeline.input_names() == "clip.mp4, frame 0-1"


def test_pipeline_without_output_has_no_annotate_stage(clip: Path) -> None:
    pipeline, log = _pipeline(clip, None)
    pipeline.run_iteration(0, warmup=False)
    pipeline.close()
    assert [m.name for m in log.markers if m.kind == "stage" and m.phase == "B"] == [
        "decode",
        "preprocess",
        "forward",
        "postprocess",
    ]


def test_pipeline_on_images_writes_each_annotated_image(tmp_path: Path, bus_images: list[Path]) -> None:
    pipeline, log = _pipeline(bus_images, tmp_path / "annotated")
    for i in (0, 1):
        pipeline.run_iteration(i, warmup=False)
    pipeline.close()
    assert [m.name for m in log.markers if m.kind == "stage" and m.phase == "B" and m.iteration == 0] == [
        "load",
        "preprocess",
        "forward",
        "postprocess",
        "annotate",
        "encode",
    ]
    assert sorted(p.name for p in (tmp_path / "annotated").iterdir()) == sorted(p.name for p in bus_images)
    assert pipeline.video is None and pipeline.sink.written == 2


# ----------------------------------------------------------------------------- the session and the report


def _run_doc(tmp_path: Path, passes: dict[str, tuple[str, int]]) -> Any:
    from hwprof.schema.frames import FramesDoc
    from hwprof.schema.run import RunDoc
    from hwprof.schema.run_passes import PassDoc

    run = RunDoc.of(status="complete", passes={})
    for name, (status, written) in passes.items():
        output = f"passes/{name}/annotated.mp4"
        (tmp_path / output).parent.mkdir(parents=True)
        write_clip(tmp_path / output, written)
        run.passes[name] = PassDoc.of(status=status, frames=FramesDoc.of(read=written, written=written, output=output))
    return run


def test_keep_annotated_moves_the_first_good_pass_and_removes_the_rest(tmp_path: Path) -> None:
    from hwprof.session.annotated import keep_annotated

    run = _run_doc(tmp_path, {"timing": ("failed", 2), "kernels": ("ok", 3), "trace": ("ok", 4)})
    target = tmp_path / "kept.mp4"
    doc = keep_annotated(tmp_path, run, target)
    assert (doc.pass_name, doc.frames, doc.kind, doc.error) == ("kernels", 3, "video", None)
    assert count_frames(target) == 3
    assert not list((tmp_path / "passes").glob("*/annotated.mp4"))


def test_keep_annotated_says_why_nothing_was_kept(tmp_path: Path) -> None:
    from hwprof.schema.run import RunDoc
    from hwprof.session.annotated import keep_annotated

    doc = keep_annotated(tmp_path, RunDoc.of(status="complete", passes={}), tmp_path / "kept.mp4")
    assert doc.error == "no pass wrote an annotated frame"


def test_end_to_end_note_names_the_stages_and_both_rates() -> None:
    from hwprof.analysis.stages import StageRow, Stages
    from hwprof.render.report_sections import end_to_end_note

    def row(name: str, p50: float) -> StageRow:
        return StageRow(name, 5, p50, p50, p50, p50, 0.0, None, 1e3 / p50)

    names = ("decode", "preprocess", "forward", "postprocess", "annotate", "encode")
    rows = [row(n, p) for n, p in zip(names, (2.0, 3.0, 50.0, 4.0, 1.0, 10.0), strict=True)] + [row("iteration", 80.0)]
    note = end_to_end_note(Stages(rows, "timing", 1, 12.5, None))
    assert note.startswith("FPS: inference 20.00 (forward alone), end to end 12.50 (batch 1 / iteration p50; an ")
    assert "an iteration is decode + preprocess + forward + postprocess + annotate + encode)" in note
    unwritten = end_to_end_note(Stages(rows[:4] + rows[-1:], "timing", 1, 12.5, None))
    assert "no frame is written (--annotate OUT adds annotate + encode)" in unwritten


def test_ffmpeg_and_opencv_samples_are_their_own_kinds() -> None:
    from hwprof.collectors.perf_sampling.script import classify

    from hwprof.core.kernels import KIND_CODEC, KIND_OPENCV

    libs = "/v/site-packages/opencv_python.libs"
    codec = classify("[unknown]", f"{libs}/libavcodec-c4204469.so.62.28.101", 0x7F00)
    assert (codec.name, codec.kind, codec.library) == ("[libavcodec]", KIND_CODEC, "libavcodec")
    scale = classify("sws_scale", f"{libs}/libswscale-fe215b0b.so.9.5.101", 0x7F00)
    assert (scale.name, scale.kind) == ("sws_scale", KIND_CODEC)
    assert classify("[unknown]", "/v/site-packages/cv2/cv2.abi3.so", 0x7F00).kind == KIND_OPENCV


# ----------------------------------------------------------------------------- the command line


def _collect(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64", *args],
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("fake", "hwprof: error: OpenCV cannot open the video"),
        ("out-missing", "hwprof: error: --annotate"),
        ("out-webm", "a video output ends in one of"),
    ],
)
def test_bad_video_input_or_output_exit_2_before_any_pass(tmp_path: Path, setup: str, message: str) -> None:
    clip = write_clip(tmp_path / "clip.mp4", 3)
    if setup == "fake":
        fake = tmp_path / "fake.mp4"
        fake.write_text("not a video")
        args = ["--images", str(fake)]
    else:
        out = "missing/out.mp4" if setup == "out-missing" else "out.webm"
        args = ["--images", str(clip), "--annotate", str(tmp_path / out)]
    proc = _collect(tmp_path, *args, "--results", str(tmp_path / "res"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hwprof: error:") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and proc.stdout == ""
    assert not (tmp_path / "res").exists(), "refused before a run directory was made"


@pytest.mark.slow
def test_collect_a_video_end_to_end(tmp_path: Path) -> None:
    """`collect --images CLIP --annotate OUT` with the timing and kernels passes: decode and encode in the stage
    table with positive times, OUT a readable video of the timing pass's frames, perf samples in decode and
    encode, the stages in the trace, and the clip (shorter than a pass) looped with a warning. --perf-rate keeps
    the kernels pass at --iters (the auto plan gives a 30 ms forward hundreds of iterations)."""
    clip = write_clip(tmp_path / "clip.mp4", 3, size=(640, 480), noise=True)
    out, run_dir = tmp_path / "out.mp4", tmp_path / "run"
    args = ["--imgsz", "128", "--iters", "3", "--warmup", "1", "--only", "timing,perf_sampling", "--perf-rate", "4000"]
    proc = _collect(tmp_path, *args, "--images", str(clip), "--annotate", str(out), "--out", str(run_dir), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = " ".join((proc.stdout + proc.stderr).split())  # the report on stdout, the warning on stderr
    assert "clip.mp4 has 3 frames and a pass reads at least 4" in text
    assert "an iteration is decode + preprocess + forward + postprocess + annotate + encode" in text
    run = json.loads((run_dir / "run.json").read_text())
    for stage in ("decode", "annotate", "encode"):
        assert run["stages"][stage]["p50_ms"] > 0, stage
    summary = json.loads((run_dir / "summary.json").read_text())["stages"]
    assert [r["name"] for r in summary["rows"]] == [
        "decode",
        "preprocess",
        "forward",
        "postprocess",
        "annotate",
        "encode",
        "iteration",
    ]
    assert summary["inference_fps"] > summary["fps"] > 0
    timing = run["passes"]["timing"]["frames"]
    assert timing["read"] == 4 and timing["rewinds"] == 1 and timing["written"] == 4
    assert run["annotated"] == {"path": str(out), "pass": "timing", "frames": 4, "kind": "video"}
    assert count_frames(out) == 4
    assert not list((run_dir / "passes").glob("*/annotated.mp4")), "the passes' copies are removed"
    perf = run["collectors"]["perf_sampling"]
    assert perf["status"] in ("ok", "unavailable"), perf  # unavailable: a host where perf cannot sample (doctor)
    if perf["status"] == "ok":
        kernels = json.loads((run_dir / "passes" / "kernels" / "perf_sampling.kernels.json").read_text())
        stages = kernels["stages"]
        assert stages["decode"]["samples"] > 0 and stages["encode"]["samples"] > 0, stages
        # Encoding runs on the pipeline thread: FFmpeg is in encode. Decoding may not: FFmpeg's frame threads decode
        # the next frames while the pipeline goes on, so at 4 frames the decode stage can hold no FFmpeg sample
        # (CI: 6 samples, kernel and OpenCV); the report's note then names the stages that hold it.
        assert "FFmpeg" in stages["encode"]["kinds"], stages["encode"]
        if "FFmpeg" not in stages["decode"]["kinds"]:
            elsewhere = [n for n, t in stages.items() if n not in ("decode", "encode") and "FFmpeg" in t["kinds"]]
            assert not elsewhere or "FFmpeg outside decode and encode" in text, elsewhere
        assert "kernels per pipeline stage" in text
    _check_trace_stages(run_dir)


def _check_trace_stages(run_dir: Path) -> None:
    """The trace has decode, annotate and encode slices on each pass's main thread."""
    from hwprof.trace.tracks import build_timeline

    timeline = build_timeline(run_dir)
    for timeline_pass in timeline.passes:
        names = {s.name for t in timeline_pass.slice_tracks for s in t.slices if s.category.startswith("stage")}
        assert {"decode", "annotate", "encode"} <= names, (timeline_pass.name, sorted(names))


def test_stage_kernels_table_orders_stages_and_says_when_ffmpeg_decodes_ahead() -> None:
    from types import SimpleNamespace

    from hwprof.core.kernels import KIND_CODEC, KIND_OPENMP
    from hwprof.core.native_view import NativeKernel, NativeLayer
    from hwprof.render.stage_kernels import stage_kernels_spec

    def table(samples: int, kinds: dict[str, float], kernel: str, library: str) -> NativeLayer:
        top = NativeKernel(kernel, next(iter(kinds)), library, 1.0, samples)
        return NativeLayer(samples, 1.0, kinds, [top], 2)

    stages = {
        "encode": table(10, {KIND_CODEC: 1.0}, "[libavcodec]", "libavcodec"),
        "forward": table(80, {KIND_OPENMP: 1.0}, "[OpenMP runtime: wait/spin/fork]", "libgomp"),
        "decode": table(5, {KIND_CODEC: 1.0}, "[libswscale]", "libswscale"),
        "preprocess": table(5, {KIND_CODEC: 0.4, KIND_OPENMP: 0.6}, "[libavcodec]", "libavcodec"),
    }
    view = SimpleNamespace(stages=stages, iterations=3)
    spec = stage_kernels_spec(SimpleNamespace(layers=SimpleNamespace(native=view)))  # type: ignore[arg-type]
    assert spec is not None
    assert [row[0] for row in spec.rows] == ["decode", "preprocess", "forward", "encode"]
    assert spec.rows[0][2] == "5.0%" and "FFmpeg 100.0%" in spec.rows[0][3]
    assert any("FFmpeg outside decode and encode (preprocess 40.0%)" in note for note in spec.notes)


def _video_run(root: Path) -> Path:
    """A finished run (test_analysis.make_run) made a video run: its timing pass decodes instead of loading, and
    it recorded the video, the frames each pass read and the output kept."""
    from test_analysis import make_run

    from hwprof.schema.run import RunDoc
    from hwprof.session.finish import finalize

    make_run(root)
    markers = root / "passes" / "timing" / "markers.jsonl"
    markers.write_text(markers.read_text().replace('"load"', '"decode"'))
    run = json.loads((root / "run.json").read_text())
    video = {"path": "/v/clip.mp4", "width": 640, "height": 480, "frames": 3, "fps": 30.0, "codec": "FMP4"}
    run["images"] = {"paths": ["/v/clip.mp4"], "skipped": [], "source": "/v/clip.mp4", "video": video}
    run["config"]["annotate"] = "/v/out.mp4"
    run["passes"]["timing"]["frames"] = {"read": 4, "rewinds": 1, "written": 4, "output": "passes/timing/x.mp4"}
    run["annotated"] = {"path": "/v/out.mp4", "pass": "timing", "frames": 4, "kind": "video"}
    finalize(root, RunDoc.read(run, "run.json"))
    return root


def test_compare_and_the_header_show_the_video_run(tmp_path: Path) -> None:
    from test_analysis import make_run

    from hwprof.analysis.compare import compare_runs
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.compare.views import comparison_markdown
    from hwprof.render.report import header_lines
    from hwprof.rundir.reader import RunData

    images, video = make_run(tmp_path / "a"), _video_run(tmp_path / "b")
    c = compare_runs([images, video])
    assert [r.key for r in c.stages] == ["load", "decode", "preprocess", "forward", "postprocess", "iteration"]
    assert [h.source for h in c.runs] == ["images", "video clip.mp4 + annotated"]
    assert c.runs[1].inference_fps == pytest.approx(10.0)
    text = comparison_markdown(c)
    assert "| input | images | video clip.mp4 + annotated |" in text and "| FPS (inference) | 10.00 | 10.00 |" in text
    lines = dict(header_lines(analyse(RunData.load(video))))
    assert lines["input"].startswith("video clip.mp4 (640x480, 3 frames at 30 fps, FMP4), consecutive frames per ")
    assert "frames decoded per pass: timing 4 (looped 1x) (looped: read again from its first frame" in lines["input"]
    assert lines["output"].startswith("annotated video /v/out.mp4: 4 frames of the timing pass")
    assert "input" not in dict(header_lines(analyse(RunData.load(images))))
