"""Candidates tied to findings by topic; blocked with a reason where the host or the run cannot have them."""

from __future__ import annotations

from hwprof.analysis.advice.candidate import RunFacts
from hwprof.analysis.advice.candidates import candidates, thread_counts
from hwprof.analysis.finding import Finding


def facts(**kw: object) -> RunFacts:
    base = dict(
        runtime="torch",
        precision="fp32",
        device="cpu",
        channels_last=False,
        threads=4,
        batch=1,
        isa_flags=("avx2", "fma"),
        cpus_busy=1.6,
        unavailable_runtimes={},
    )
    base.update(kw)
    return RunFacts(**base)  # type: ignore[arg-type]


def finding(topic: str, weight: float = 0.5) -> Finding:
    return Finding(f"title of {topic} {weight}", "evidence", "kind", weight, topic=topic)


def by_key(cs: list) -> dict:
    return {c.key: c for c in cs}


def test_each_candidate_takes_the_heaviest_finding_of_its_most_specific_topic() -> None:
    found = [finding("efficiency", 0.25), finding("below-roof", 0.1), finding("below-roof", 0.3)]
    cs = by_key(candidates(facts(), found))
    assert cs["channels_last"].finding == "title of below-roof 0.3"  # more specific than efficiency
    assert cs["onnxruntime"].finding == "title of efficiency 0.25"
    assert not cs["channels_last"].blocked and not cs["onnxruntime"].blocked


def test_a_candidate_no_finding_points_to_is_not_run_with_the_topics_it_answers() -> None:
    cs = by_key(candidates(facts(), [finding("efficiency")]))
    assert "no finding of this run points to it" in cs["omp-passive"].blocked
    assert "openmp-wait" in cs["omp-passive"].blocked
    assert cs["threads-2"].blocked  # no threads finding


def test_units_the_host_lacks_block_bf16_and_int8_and_units_it_has_do_not() -> None:
    cs = by_key(candidates(facts(), [finding("efficiency")]))
    assert "no bf16 units" in cs["bf16"].blocked and "AVX512_BF16" in cs["bf16"].blocked
    assert "no int8 units" in cs["int8"].blocked
    rich = by_key(candidates(facts(isa_flags=("avx512_bf16", "avx512_vnni")), [finding("efficiency")]))
    assert not rich["bf16"].blocked and not rich["int8"].blocked
    unknown = by_key(candidates(facts(isa_flags=None), [finding("efficiency")]))
    assert "recorded no ISA flags" in unknown["bf16"].blocked


def test_a_missing_runtime_blocks_its_candidate_with_the_fix() -> None:
    why = "openvino is not installed; fix: pip install openvino"
    cs = by_key(candidates(facts(unavailable_runtimes={"openvino": why}), [finding("efficiency")]))
    assert cs["openvino"].blocked == why


def test_thread_counts_come_from_the_cpus_busy_and_half_the_threads() -> None:
    assert thread_counts(facts(threads=4, cpus_busy=1.6)) == [2]
    assert thread_counts(facts(threads=8, cpus_busy=2.6)) == [3, 4]
    assert thread_counts(facts(threads=2, cpus_busy=None)) == [1]
    assert thread_counts(facts(threads=1)) == []


def test_the_openmp_environment_change_needs_its_own_process() -> None:
    cs = by_key(candidates(facts(), [finding("openmp-wait")]))
    assert cs["omp-passive"].env == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert cs["omp-passive"].method == "pass-level estimate"
    assert cs["channels_last"].method == "paired"


def test_a_run_already_in_a_state_gets_no_candidate_for_it() -> None:
    keys = by_key(candidates(facts(channels_last=True, runtime="openvino"), [finding("efficiency")]))
    assert "channels_last" not in keys and "openvino" not in keys and "compile" not in keys


def test_gpu_candidates_answer_gpu_findings() -> None:
    cs = by_key(candidates(facts(device="cuda"), [finding("launch-bound"), finding("layout-transposes")]))
    assert {"cuda-graph", "compile-reduce-overhead", "fp16", "bf16", "channels_last", "batch-8", "batch-32"} <= set(cs)
    assert cs["cuda-graph"].finding.startswith("title of launch-bound")
    assert cs["channels_last"].finding.startswith("title of layout-transposes")
    assert cs["batch-8"].per_image and not cs["cuda-graph"].has_layers_pass
