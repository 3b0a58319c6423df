"""The reference forward: prefill-then-decode over the static KV cache equals recomputing the
whole sequence, for every model family, in float32 and (looser) bfloat16."""

import pytest
import torch

from inference.checkpoint import load_weights
from inference.config import ModelConfig
from inference.reference import KVCache, ReferenceModel


def model(path, dtype=torch.float32, max_len=64):
    cfg = ModelConfig.from_file(path / "config.json")
    return cfg, ReferenceModel(cfg, load_weights(path, cfg, dtype=dtype), max_len)


@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen3", "tiny-llama", "tiny-untied"])
def test_prefill_then_decode_equals_full_recomputation(synth_dir, shape):
    cfg, m = model(synth_dir(shape))
    ids = torch.randint(0, cfg.vocab_size, (24,), generator=torch.Generator().manual_seed(0))
    full = m.forward(ids, 0, KVCache(cfg, 64, "cpu", torch.float32))

    cache = KVCache(cfg, 64, "cpu", torch.float32)
    steps = [m.forward(ids[:10], 0, cache)]
    steps += [m.forward(ids[i:i + 1], i, cache) for i in range(10, 24)]
    torch.testing.assert_close(torch.cat(steps), full, rtol=1e-5, atol=1e-5)


def test_decode_does_not_see_stale_cache_rows_beyond_the_position(synth_dir):
    """Rows past the current position (left over from a longer earlier request) are masked."""
    cfg, m = model(synth_dir("tiny"))
    ids = torch.arange(5, 25)
    cache = KVCache(cfg, 64, "cpu", torch.float32)
    cache.k.normal_(), cache.v.normal_()  # garbage everywhere
    a = m.forward(ids, 0, cache)
    b = m.forward(ids, 0, KVCache(cfg, 64, "cpu", torch.float32))
    torch.testing.assert_close(a, b)


def test_bfloat16_stays_close_to_float32(synth_dir):
    path = synth_dir("tiny-qwen3")
    cfg, m32 = model(path)
    _, m16 = model(path, torch.bfloat16)
    ids = torch.arange(3, 40)
    a = m32.forward(ids, 0, KVCache(cfg, 64, "cpu", torch.float32))
    b = m16.forward(ids, 0, KVCache(cfg, 64, "cpu", torch.bfloat16))
    assert ((a - b).norm() / a.norm()).item() < 5e-2
