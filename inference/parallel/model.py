"""One rank's reference forward under tensor parallelism: the oracle's math plus two all-reduces.

`TPModel` is `ReferenceModel` run on a shard (`shard.shard_weights`) with the shard's config
(`TPPlan.local_cfg`): the attention of the rank's heads and the MLP of its FFN slice each give a
partial sum of the layer's output, which `comm.all_reduce_` completes before the residual add.
The final logits are this rank's vocabulary slice. Plain PyTorch, eager; CPU or CUDA.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..config import ModelConfig
from ..reference import KVCache, ReferenceModel, rms_norm
from ..weights import ModelWeights
from .comm import Comm


class TPModel(ReferenceModel):
    def __init__(self, local_cfg: ModelConfig, shard: ModelWeights, max_len: int, comm: Comm):
        super().__init__(local_cfg, shard, max_len)
        self.comm = comm

    @torch.inference_mode()
    def forward(self, ids: Tensor, start: int, cache: KVCache) -> Tensor:
        """ids: [T] int64 at positions start..start+T-1 -> this rank's logits [T, V/tp] float32."""
        T, eps = ids.shape[0], self.cfg.rms_norm_eps
        assert start + T <= cache.max_len, "KV cache overflow (the engine checks lengths first)"
        x = self.w.embed[ids]
        for i, layer in enumerate(self.w.layers):
            x = x + self.comm.all_reduce_(self._attention(i, layer, rms_norm(x, layer.attn_norm, eps), start, cache))
            gate, up = (rms_norm(x, layer.mlp_norm, eps) @ layer.gate_up.T).chunk(2, dim=-1)
            x = x + self.comm.all_reduce_((F.silu(gate) * up) @ layer.down.T)
        x = rms_norm(x, self.w.norm, eps)
        return (x @ self.w.lm_head.T).float()
