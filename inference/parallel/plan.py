"""The tensor-parallel plan: which weight splits how across `tp` ranks, and each rank's share.

Megatron-style, one reduction after attention and one after the MLP of every layer:

    tensor        split                                   after the matmul
    embed         replicated (every rank looks tokens up)  -
    qkv (+bias)   by heads: rank r gets q heads            -
                  [r*Hq/tp, (r+1)*Hq/tp) and their k/v heads
    o             by input columns (the rank's q heads)    all-reduce (sum of partial outputs)
    gate_up       by columns of the FFN: gate and up       -
                  rows [r*I/tp, (r+1)*I/tp) each
    down          by input columns (the same FFN slice)    all-reduce
    lm_head       by vocabulary: rows [r*V/tp, (r+1)*V/tp) distributed argmax / sampling
    norms         replicated (q_norm/k_norm act per head)  -

K/V heads: when Hkv % tp == 0 each rank holds Hkv/tp of them; when tp % Hkv == 0 (the
Qwen2.5 shapes have Hkv = 2, so TP=4) each rank holds the one K/V head its q heads attend to,
replicated on tp/Hkv ranks. Anything else is refused here with one message.
This file only computes ranges and checks shapes; `shard.py` cuts tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import ModelConfig
from ..errors import EngineError

SPLITS = {  # LayerWeights / ModelWeights field -> how it is split (documentation and tests)
    "embed": "replicated", "norm": "replicated", "attn_norm": "replicated", "mlp_norm": "replicated",
    "q_norm": "replicated", "k_norm": "replicated",
    "qkv": "heads", "qkv_bias": "heads", "o": "input", "gate_up": "ffn", "down": "input", "lm_head": "vocab",
}
REDUCED_AFTER = ("o", "down")  # all-reduces per layer: 2 (56 per token on the 28-layer 1.5B shape)


@dataclass(frozen=True)
class TPPlan:
    cfg: ModelConfig
    tp: int

    def __post_init__(self):
        cfg, tp = self.cfg, self.tp
        if not isinstance(tp, int) or tp < 1:
            raise EngineError(f"tensor parallel size must be an integer >= 1, got {tp!r}")
        problems = []
        if cfg.num_heads % tp:
            problems.append(f"{cfg.num_heads} attention heads")
        if cfg.num_kv_heads % tp and tp % cfg.num_kv_heads:
            problems.append(f"{cfg.num_kv_heads} key/value heads (need a multiple or a divisor of {tp})")
        if cfg.intermediate_size % tp:
            problems.append(f"intermediate size {cfg.intermediate_size}")
        if cfg.vocab_size % tp:
            problems.append(f"vocabulary {cfg.vocab_size}")
        if problems:
            raise EngineError(f"--tp {tp} cannot split this model evenly: " + ", ".join(problems))

    # ---- per-rank shares (half-open ranges in the full tensors' index space) ----
    @property
    def heads_per_rank(self) -> int:
        return self.cfg.num_heads // self.tp

    @property
    def kv_heads_per_rank(self) -> int:
        return max(1, self.cfg.num_kv_heads // self.tp)

    def q_heads(self, rank: int) -> range:
        n = self.heads_per_rank
        return range(rank * n, (rank + 1) * n)

    def kv_heads(self, rank: int) -> range:
        """The K/V heads rank `rank` needs: its own share, or the one its q heads attend to."""
        if self.cfg.num_kv_heads >= self.tp:
            n = self.kv_heads_per_rank
            return range(rank * n, (rank + 1) * n)
        head = rank // (self.tp // self.cfg.num_kv_heads)
        return range(head, head + 1)

    def ffn(self, rank: int) -> range:
        n = self.cfg.intermediate_size // self.tp
        return range(rank * n, (rank + 1) * n)

    def vocab(self, rank: int) -> range:
        n = self.cfg.vocab_size // self.tp
        return range(rank * n, (rank + 1) * n)

    def local_cfg(self) -> ModelConfig:
        """The config one rank's shard looks like (the same on every rank): its heads, FFN, vocab."""
        return replace(self.cfg, num_heads=self.heads_per_rank, num_kv_heads=self.kv_heads_per_rank,
                       intermediate_size=self.cfg.intermediate_size // self.tp,
                       vocab_size=self.cfg.vocab_size // self.tp)
