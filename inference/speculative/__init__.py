"""Speculative decoding by prompt lookup: draft tokens copied from the prompt and the output so far,
checked k at a time by one forward of the model (greedy requests only)."""

from .drafter import DraftConfig, PromptLookupDrafter
from .decode import SpecStats, speculative_tokens

__all__ = ["DraftConfig", "PromptLookupDrafter", "SpecStats", "speculative_tokens"]
