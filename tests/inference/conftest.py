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
