#!/usr/bin/env bash
# Twenty-first session, one GPU, issue 24: FP8 scales and offsets in float16 (1.125 bytes a weight, were 1.25; run with
# bench-results/h100-2026-11-27-session21/fp16-scales.patch applied: measured, not kept). scripts/gpu/s20.sh without
# the LM head probe, logs in $OUT/s21/:
#   PART=1: the FP8 kernel, fast-path and step-plan gpu tests, then the FP8 step before (.before: float32 scales and
#           offsets) / now in turn (lab.probe_fp8_step, ROUNDS times).
#   PART=2: the quality gate on the real model at $MODEL, then inference.bench --weights fp8,bf16 per shape.
# Usage: OUT=... BUDGET=540 PART=1|2 [TESTS=0] [SHAPES="a b"] [ROUNDS=2] bash scripts/gpu/s21.sh
NAME=s21 HEAD8=0 exec bash "$(dirname "$0")/s20.sh"
