"""The speculative decode loop: the token source Engine.generate reads from when speculation is on.

While the drafter has nothing to propose it runs plain steps exactly like the plain loop (up to
`lag` steps in flight, tokens read back without stalling the device). When the tail read back
matches earlier text it stops issuing, reads the steps in flight, and if the drafter still has a
draft runs one verify step (`runner.verify(draft)`: the last token and the k drafted ones in one
forward; it returns the accepted prefix plus the model's own next token). The caller consumes the
tokens one by one, so EOS, stop strings, max_tokens and cancellation act exactly as without
speculation; tokens past the point where it stops are discarded like the plain loop's overshoot.

Greedy only (the runner's argmax decides what is accepted): the engine keeps sampled requests on
the plain loop.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from .drafter import PromptLookupDrafter


@dataclass
class SpecStats:
    drafted: int = 0  # draft tokens sent to verify steps
    accepted: int = 0  # of those, the ones the model agreed with
    verify_steps: int = 0
    plain_steps: int = 0

    @property
    def accepted_per_verify(self) -> float:
        return self.accepted / self.verify_steps if self.verify_steps else 0.0


def speculative_tokens(runner, first, drafter: PromptLookupDrafter, max_tokens: int, read: Callable[[object], int],
                       stats: SpecStats, cancelled: Callable[[], bool], lag: int) -> Iterator[int]:
    """Yield generated token ids (the first is `first`, a device token from runner.start) until
    max_tokens have been yielded or the caller stops reading. `read(device_token) -> int` waits
    for a token of a plain step."""
    pending = deque([first])  # plain-step tokens not yet read back
    issued, done = 1, 0  # tokens the runner has produced (or has in flight), tokens yielded
    drafting = False  # a match was seen: issue no more plain steps, then try a draft
    most = getattr(runner, "max_draft", max_tokens)  # the runner's verify width - 1 (the fast path's is fixed)
    while done < max_tokens:
        if not pending:  # every token is on the host: the tail is known
            if drafting:
                draft = drafter.propose(limit=min(most, max_tokens - issued - 1))
                if draft:
                    out = runner.verify(draft)
                    n = len(out) - 1
                    stats.verify_steps += 1
                    stats.drafted += len(draft)
                    stats.accepted += n
                    issued += len(out)
                    drafter.extend(out)
                    drafter.feedback(len(draft), n)
                    for t in out:
                        done += 1
                        yield t
                        if done >= max_tokens:
                            return
                    continue
            drafting = False
        if not drafting:
            while issued < max_tokens and len(pending) < lag and not (pending and cancelled()):
                pending.append(runner.step())
                stats.plain_steps += 1
                issued += 1
        token = read(pending.popleft())
        drafter.append(token)
        done += 1
        yield token
        if not drafting and drafter.ready():
            drafting = True
