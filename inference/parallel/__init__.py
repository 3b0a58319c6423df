"""Tensor-parallel decode: one request split across `tp` processes (one per GPU, or CPU over gloo).

plan.py (which weight splits how) -> shard.py (cut a rank's weights) -> comm.py (collectives) ->
model.py / sampling.py (one rank's forward and token choice) -> runner.py (rank runners, the
engine's rank 0) -> launch.py (spawn the ranks). allreduce_bench.py times the collectives.
This is the reference path (eager PyTorch per rank); the fused single-GPU fast path has no
tensor-parallel twin yet.
"""
