from __future__ import annotations

import pytest

from hwprof.core.config import RunConfig
from hwprof.rundir.worker_files import read_config, write_config
from hwprof.session.registry import all_collectors, by_name, check_names


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("imgsz", 100, "multiple of 32"),
        ("batch", 0, "--batch"),
        ("iters", 0, "--iters"),
        ("warmup", -1, "--warmup"),
        ("depth", 3, "--depth"),
        ("conf", 1.5, "--conf"),
        ("counters", "x", "--counters"),
    ],
)
def test_bad_config_values(field: str, value: object, message: str) -> None:
    config = RunConfig(**{field: value})
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_config_round_trip(tmp_path) -> None:
    config = RunConfig(model="yolov8n", events=["task-clock"], extra={"rect": True})
    write_config(tmp_path, config)
    assert read_config(tmp_path) == config


def test_registry_finds_the_foundation_collectors() -> None:
    names = by_name()
    assert {"timing", "flops"} <= set(names)
    assert names["timing"].pass_name == "timing"
    for cls in all_collectors():
        assert cls.name and cls.pass_name, cls


def test_unknown_collector_lists_known_ones() -> None:
    with pytest.raises(ValueError, match=r"known: .*timing"):
        check_names(["timing", "nope"])


def test_only_and_skip() -> None:
    timing = by_name()["timing"]
    assert timing.wanted(RunConfig())
    assert not timing.wanted(RunConfig(skip=["timing"]))
    assert not timing.wanted(RunConfig(only=["flops"]))
    assert timing.wanted(RunConfig(only=["timing"]))
