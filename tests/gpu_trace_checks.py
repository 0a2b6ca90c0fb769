"""Checks of a GPU pass in a trace.pftrace, read with Perfetto's trace processor: shared by the grafted
CPU+GPU run (test_gpu_trace.py) and the run `hwprof gpu-import --out` writes (test_gpu_import_run.py)."""

from __future__ import annotations

from typing import Any

from hwprof.collectors.gpu.kineto.trace import GPU_CATS
from test_perfetto_trace import BAD_STATS


def check_kernels_and_launches(tp: Any, track: str, kernels: int) -> None:
    """No trace-processor error; `kernels` slices on the GPU `track`, each with a flow from its launch; every
    launch inside its layer's slice on the launching thread."""
    assert tp.query(BAD_STATS) == []
    on_gpu = tp.query(
        f"select count(*) as n from slice s join track t on s.track_id = t.id where t.name = '{track}'"
        f" and s.category in {tuple(GPU_CATS)}"
    )[0]["n"]
    assert on_gpu == kernels
    flows = tp.query(
        f"""
        select count(*) as n from flow f
        join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id
        join track tb on b.track_id = tb.id
        where a.category = 'cuda_launch' and tb.name = '{track}' and b.category in {tuple(GPU_CATS)}
        """
    )[0]["n"]
    assert flows == kernels
    outside = tp.query(
        """
        select count(*) as n from slice s where s.category = 'cuda_launch'
        and not exists (select 1 from ancestor_slice(s.id) a where a.category glob 'layer*')
        """
    )[0]["n"]
    assert outside == 0  # every launch sits inside its layer's slice on the launching thread
