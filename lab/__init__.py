"""The lab: instruments that measure the product (inference/, kernels/) on a GPU: probes, profiles, A/B of
kernel choices and tuned numbers, launch-config sweeps. Not shipped (not in pyproject's packages); run from
the repo root as `python -m lab.<instrument>` (lab/README.md lists them). The instruments reach the engine
through its public hooks only (Engine, FastRunner.use_attention (with a workspace) / use_gemv / use_tuning /
step_plan / step_graph / launch_step, the kernels' launchers with a tuning row); they never patch it.
"""
