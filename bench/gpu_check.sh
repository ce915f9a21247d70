#!/usr/bin/env bash
# The GPU check: training (compiled from a cold cache against eager, a compiled resume in the run's own bf16, the
# memory estimate), cached against uncached decoding as generate.py runs it, nanoGPT's model.py beside ours, the
# gpu tests, every inspection view and both lesson notebooks on the GPU, and DDP under torchrun (two ranks; with
# two GPUs compile(DDP) over NCCL too) on one CUDA machine, each step timed, all of it inside 8 minutes: the steps'
# caps add up to 470 s (`--dry-run` lists them). bench/gpu_check.py holds the steps and says what each measures.
#
#   bash bench/gpu_check.sh                       # every step; results in $OUT if set, else bench/out/
#   bash bench/gpu_check.sh --nanogpt ~/nanoGPT   # with a clone of github.com/karpathy/nanoGPT (not part of this repo)
#   bash bench/gpu_check.sh --only train,decode   # some steps (with the ones they need)
#   bash bench/gpu_check.sh --budget 400          # seconds for all steps (default 470)
#   bash bench/gpu_check.sh --dry-run             # each step, what it checks, its need and cap; runs nothing
#
# Prints one JSON line per step and a table at the end; writes gpu_check.log (every command's output)
# and gpu_check.json (one record: every figure). Exit 0 when every step passed (or cannot run on this machine:
# ddp with one GPU, nanogpt without --nanogpt), 1 otherwise; 2, with one error line, on a machine without a CUDA
# device or with a --nanogpt folder that holds no model.py (--dry-run needs no GPU: exit 0).
#
# Offline machines: packages the machine lacks travel as wheels in .whl/ (keep it out of git: add
# `/.whl/` to .git/info/exclude); the check installs them into /tmp/site first. konlpy (the built-in corpus of
# the tests) and, for the inspect step's notebooks, nbclient and ipykernel with what they need (the second list)
# are needed by the check; the rest let every module import. Download them on a machine with pip for CPython
# 3.12 on x86-64 Linux, the versions tested here:
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
#     konlpy==0.6.0 jpype1==1.7.1 koreanize-matplotlib==0.1.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
#     wandb==0.31.0 cwevals==0.0.1b1 distro==1.9.0 sniffio==1.3.1 platformdirs==4.14.9 pydantic==2.13.4 \
#     pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 googleapis-common-protos==1.76.0 \
#     opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
#     opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
#     opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-http-transport==0.66b2 \
#     opentelemetry-exporter-otlp-common==0.66b2
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0     # with what they need (no --no-deps here)
#
# (The first list: 24 wheels, 51 MB; konlpy alone is 19 MB.) `unzip -p .whl/NAME-*.whl '*/METADATA' |
# grep ^Requires-Dist` lists what a wheel needs.
set -u
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" bench/gpu_check.py "$@"
