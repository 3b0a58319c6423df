"""Cut loaded weights into one rank's shard, following a `TPPlan`.

`shard_weights(weights, plan, rank, device)` returns a `ModelWeights` in the layout of
`plan.local_cfg()` (packed q|k|v and gate|up, as `checkpoint.load_weights` packs them), each
tensor a contiguous copy on `device`; the full weights are left untouched. The embedding stays
whole on every rank; the LM head keeps the rank's vocabulary rows (a tied head too: the shard
is then a copy, so `tied` is False on every rank).
Not here: the forward pass (model.py) or the communication (comm.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..weights import LayerWeights, ModelWeights
from .plan import TPPlan


def _copy(t: Tensor, device) -> Tensor:
    """A contiguous copy of `t` on `device` (one copy, whatever the source's device or strides)."""
    return torch.empty(t.shape, dtype=t.dtype, device=device).copy_(t)


def _rows(t: Tensor, ranges: list[range]) -> Tensor:
    return torch.cat([t[r.start:r.stop] for r in ranges], 0)


def _cols(t: Tensor, r: range) -> Tensor:
    return t[:, r.start:r.stop]


def _qkv_rows(plan: TPPlan, rank: int) -> list[range]:
    """Row ranges of the packed q|k|v tensor that belong to `rank` (q, then k, then v)."""
    cfg, D = plan.cfg, plan.cfg.head_dim
    q, kv = plan.q_heads(rank), plan.kv_heads(rank)
    k0, v0 = cfg.q_size, cfg.q_size + cfg.kv_size
    return [range(q.start * D, q.stop * D),
            range(k0 + kv.start * D, k0 + kv.stop * D),
            range(v0 + kv.start * D, v0 + kv.stop * D)]


def shard_layer(layer: LayerWeights, plan: TPPlan, rank: int, device) -> LayerWeights:
    D, I = plan.cfg.head_dim, plan.cfg.intermediate_size
    q, ffn = plan.q_heads(rank), plan.ffn(rank)
    qkv_rows = _qkv_rows(plan, rank)
    gate_up_rows = [ffn, range(I + ffn.start, I + ffn.stop)]

    def put(t: Tensor | None) -> Tensor | None:
        return None if t is None else _copy(t, device)

    return LayerWeights(
        attn_norm=put(layer.attn_norm),
        qkv=put(_rows(layer.qkv, qkv_rows)),
        qkv_bias=None if layer.qkv_bias is None else put(_rows(layer.qkv_bias, qkv_rows)),
        q_norm=put(layer.q_norm),
        k_norm=put(layer.k_norm),
        o=put(_cols(layer.o, range(q.start * D, q.stop * D))),
        mlp_norm=put(layer.mlp_norm),
        gate_up=put(_rows(layer.gate_up, gate_up_rows)),
        down=put(_cols(layer.down, ffn)),
    )


def shard_weights(weights: ModelWeights, plan: TPPlan, rank: int, device=None) -> ModelWeights:
    """Rank `rank`'s shard of `weights` on `device` (default: where the weights are)."""
    if not 0 <= rank < plan.tp:
        raise ValueError(f"rank {rank} out of range for tp={plan.tp}")
    device = weights.device if device is None else torch.device(device)
    v = plan.vocab(rank)
    return ModelWeights(
        embed=_copy(weights.embed, device),
        layers=[shard_layer(layer, plan, rank, device) for layer in weights.layers],
        norm=_copy(weights.norm, device),
        lm_head=_copy(weights.lm_head[v.start:v.stop], device),
    )
