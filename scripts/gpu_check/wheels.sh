#!/usr/bin/env bash
# The Python 3.12 wheels that scripts/gpu_check/run.sh installs on a lent GPU machine (its image has torch
# 2.11.0+cu130, numpy, matplotlib, jinja2, onnx, onnxruntime, nvidia-ml-py..., and no network): hwprof's
# dependencies the image lacks, without their own (each checked by its Requires-Dist). .whl/cond/ holds those
# run.sh installs only where the image's version is older than hwprof needs. Left out: polars (~40 MB, only the
# Python API's tables), openvino, mlflow, ray (optional collectors and extras). Run here, from the repository root:
#   bash scripts/gpu_check/wheels.sh   (then `echo /.whl/ >> .git/info/exclude`; the device call carries .whl)
set -euo pipefail
cd "$(dirname "$0")/../.."
get() {
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
        --platform manylinux2010_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$@"
}
get .whl ultralytics==8.4.190 ultralytics-thop==2.2.3 ultralytics-platform==0.1.99 perfetto==0.59.1 \
    pyperf==2.10.0 py-spy==0.4.3 scalene==2.4.0 pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0 \
    typing-inspection==0.4.5 python-papi==6.0.0.2 cffi==2.1.1 pycparser==3.12
get .whl/cond protobuf==6.33.6 typing_extensions==4.16.0 rich==15.0.0 psutil==7.2.2
du -sh .whl
