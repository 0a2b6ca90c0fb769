"""The Nsight Compute counters of tensor-core math a run may hold, and the fix a report names when they are
missing. Shared by the ncu collector (which asks ncu for them) and the GPU analysis (which reads them); here,
in the schema, so that the analysis imports no collector code.
"""

from __future__ import annotations

TENSOR_MATH = (
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
)
"""Warp instructions of tensor-core math: HMMA (fp16/bf16/tf32 mma), IMMA (integer), GMMA (Hopper's
warpgroup wgmma). Names as ncu lists them on sm_90 (GH100); GMMA exists on Hopper only."""
TENSOR_MATH_FIX = (
    "record kernel replay with ncu --metrics "
    + ",".join(TENSOR_MATH)
    + " (hwprof collect --counters ncu asks for those its ncu lists)"
)
