"""Speculative decoding on the real default model (SmolLM2-135M-Instruct, CPU reference, float32):
a few short code-edit chat prompts give the same greedy tokens with speculation on and off, and
drafts copied from the prompt are accepted."""

import pytest

from inference.engine import Engine, FinishEvent
from inference.prompts import Prompt
from inference.sampling import SamplingParams
from inference.speculative import DraftConfig

pytestmark = pytest.mark.slow

EDITS = [
    "Add type hints to this function.\n\n```python\ndef area(width, height):\n    return width * height\n```",
    "Rename x to total in this code.\n\n```python\ndef add_all(items):\n    x = 0\n    for item in items:\n"
    "        x += item\n    return x\n```",
    "Fix the bug: it should return the largest number.\n\n```python\ndef largest(numbers):\n    best = numbers[0]\n"
    "    for n in numbers:\n        if n < best:\n            best = n\n    return best\n```",
]


@pytest.fixture(scope="module")
def engine():
    return Engine.from_pretrained("default", device="cpu", max_context=1024)


def generate(engine, text, speculate):
    events = list(engine.generate(Prompt.chat(text), SamplingParams(max_tokens=64, speculate=speculate)))
    assert isinstance(events[-1], FinishEvent)
    return [t for e in events[:-1] for t in e.token_ids], events[-1].stats


def test_real_model_edits_are_identical_with_speculation_and_accept_drafts(engine):
    engine.draft_config = DraftConfig(cost_aware=False)  # CI machines are too noisy to time the choice
    drafted = accepted = 0
    for text in EDITS:
        plain, _ = generate(engine, text, False)
        spec, s = generate(engine, text, True)
        assert spec == plain
        assert s.speculative
        drafted, accepted = drafted + s.drafted, accepted + s.accepted
    # Measured (this model, these prompts): 27 of 111 drafted tokens accepted; the answers rewrite more
    # than they copy (sum(items), max(numbers)), so drafts past the copied signature are mostly rejected.
    assert accepted >= 0.15 * drafted > 0
