"""The speculative decode loop: the token source Engine.generate reads from when speculation is on.

While the drafter has nothing to propose it runs plain steps exactly like the plain loop (up to
`lag` steps in flight, tokens read back without stalling the device). When the tail read back
matches earlier text it stops issuing, reads the steps in flight, and if the drafter still has a
draft runs one verify step (`runner.verify_async(draft)()`: the last token and the k drafted ones in
one forward; the call launches it, the returned callable waits for the accepted prefix plus the model's
own next token). Before a verify step's tokens go to the caller, the next verify step (drafted from
them) or the next plain steps are launched, and a verify step after plain steps is launched before the last of
their tokens goes to the caller, so the device does not wait for the caller. The caller consumes the
tokens one by one, so EOS, stop strings, max_tokens and cancellation act exactly as without
speculation; tokens past the point where it stops are discarded like the plain loop's overshoot.

Drafts are short (DraftConfig.short_draft: a verify step of 8 columns) unless the verify step before accepted its
whole draft (then up to the runner's width: 16 columns on the fast path). While verify steps accept whole drafts
(CHAIN_AFTER in a row), the next one is chained behind the one in flight (`chain`, runners
with `can_chain`): drafted from the match's continuation past the draft in flight and its guessed next token,
launched before that one's result is read, so the device does not wait for the host between them. A chained
step runs from the state the step before it leaves, so its result is exact whatever it was drafted from; where
the guess was wrong it accepts little, and the chain stops until a draft holds entirely again.

Whether a verify step pays is measured as the run goes (`Payoff`): host-clock seconds per plain
token (between reads, so including the caller's time for it) and per verify step (launch to result,
overlapping the caller's time for the previous step's tokens) and the tokens a verify step yields; where
drafting would not pay (a verify step costs more plain steps than it yields tokens, e.g. on a launch-bound small
model) the drafter is told to hold (quiet for a spell that doubles while drafts are turned down in a row), and the
next draft goes through as a probe.

Greedy only (the runner's argmax decides what is accepted): the engine keeps sampled requests on
the plain loop.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from .drafter import PromptLookupDrafter

CHAIN_AFTER = 2  # whole drafts in a row before verify steps are chained (a wrong guess costs a verify step)


@dataclass
class SpecStats:
    drafted: int = 0  # draft tokens sent to verify steps
    accepted: int = 0  # of those, the ones the model agreed with
    verify_steps: int = 0
    plain_steps: int = 0

    @property
    def accepted_per_verify(self) -> float:
        return self.accepted / self.verify_steps if self.verify_steps else 0.0


class Payoff:
    """Host-clock costs of this run's plain tokens and verify steps; `pays()` while unknown. A draft turned down
    is followed by one let through whatever the costs say (a probe): only verify steps update the tokens they
    yield, so without probes a few bad ones early (an explanation before the code) would end drafting for the
    rest of the run (one of the edit prompts: 1.03x; its replay with probes 1.18x). The drafter's hold after
    each turned-down draft spaces the probes out. `probing`: the last True was a probe, not the costs' verdict."""

    ALPHA = 0.3  # weight of the latest verify step in the tokens-per-verify average

    def __init__(self):
        self.plain_s = self.verify_s = 0.0
        self.plain_n = self.verify_n = 0
        self.tokens = 0.0
        self.declined = False  # the last draft was turned down: let the next one through
        self.probing = False

    def plain(self, seconds: float):
        self.plain_s += seconds
        self.plain_n += 1

    def verify(self, seconds: float, tokens: int):
        self.verify_s += seconds
        self.verify_n += 1
        self.tokens = tokens if self.verify_n == 1 else self.ALPHA * tokens + (1 - self.ALPHA) * self.tokens

    def pays(self) -> bool:
        self.probing = self.declined
        if not (self.plain_n and self.verify_n) or self.declined:
            self.declined = False
            return True
        self.declined = self.tokens * self.plain_s / self.plain_n < self.verify_s / self.verify_n
        return not self.declined


def speculative_tokens(runner, first, drafter: PromptLookupDrafter, max_tokens: int, read: Callable[[object], int],
                       stats: SpecStats, cancelled: Callable[[], bool], lag: int,
                       clock: Callable[[], float] = time.perf_counter,
                       read_last: Callable[[object], int] | None = None) -> Iterator[int]:
    """Yield generated token ids (the first is `first`, runner.start's token as `read` takes it: the engine passes
    a pinned host slot, Engine._on_host) until max_tokens have been yielded or the caller stops reading.
    `read(token) -> int` waits for a token of a plain step. Plain steps in flight: `lag`, or fewer (drafter.cfg.lag) while drafts are
    landing (a verify step accepted a token within the last drafter.cfg.lag_window tokens, or the run is younger
    than that: DraftConfig.start_near): a step in flight when the tail starts to match is a token no draft can cover.

    A verify step's tokens are handed to the caller only after the device has its next work (the next
    verify step, drafted from them, or plain steps): the caller's time for those tokens overlaps the
    device's, as in the plain loop. `clock`: the host's seconds for the cost check (a replay passes its own).
    `read_last(token) -> int` (default `read`) waits for a plain step's token with no step launched behind it: the
    device idles from that token until the host launches its next work (a verify step, mostly), so the engine waits
    on the device there rather than polling."""
    pending = deque([first])  # plain-step tokens not yet read back
    issued, done = 1, 0  # tokens the runner has produced (or has in flight), tokens yielded
    drafting = False  # a match was seen: issue no more plain steps, then try a draft
    most = getattr(runner, "max_draft", max_tokens)  # the runner's verify width - 1 (the fast path's is fixed)
    payoff = Payoff() if drafter.cfg.cost_aware else None
    t_read = None  # when the last plain token was read (None after a verify step)
    inflight = None  # (result, draft, launched at, blind): a verify step on the device, its tokens not read back
    ahead = None  # (result, draft, launched at, guess): a verify step chained behind `inflight`
    chains = getattr(runner, "can_chain", False)
    streak = 0  # verify steps in a row whose drafts held entirely (chaining starts at CHAIN_AFTER)
    landed = 0 if drafter.cfg.start_near else None  # `done` when a verify step last accepted a token

    def draft_now() -> list[int]:
        width = most if streak else min(most, drafter.cfg.short_draft)  # long drafts while whole drafts hold
        draft = drafter.propose(limit=min(width, max_tokens - issued - 1))
        if draft and payoff is not None:
            if not payoff.pays():
                drafter.hold()  # would not pay: quiet for a while
                return []
            if not payoff.probing:
                drafter.release()
        return draft

    def chain(draft: list[int]):
        """A verify step launched behind the one in flight (`draft`), drafted as if that one accepts all of
        `draft` and its own next token is the match's next one (`guess`); None where the drafter has no such
        continuation or it would not pay. Whatever it is drafted from, its result is exact: it runs from the
        state the step before leaves (a wrong guess only makes it accept little)."""
        if not chains or streak < CHAIN_AFTER or cancelled():
            return None
        room = min(most, max_tokens - issued - len(draft) - 2)
        cont = drafter.continuation(len(draft) + 1 + room) if room >= 1 else []
        if len(cont) < len(draft) + 2 or cont[:len(draft)] != draft or (payoff is not None and not payoff.pays()):
            return None
        nxt = cont[len(draft) + 1:]
        result = runner.verify_async(nxt, ahead_of=len(draft) + 1)
        return None if result is None else (result, nxt, clock(), cont[len(draft)])

    def issue_plain():
        nonlocal issued
        near = landed is not None and done - landed <= drafter.cfg.lag_window
        most_in_flight = min(lag, drafter.cfg.lag) if near else lag
        while issued < max_tokens and len(pending) < most_in_flight and not (pending and cancelled()):
            pending.append(runner.step())
            stats.plain_steps += 1
            issued += 1

    while done < max_tokens:
        if inflight is not None:
            result, draft, t0, blind = inflight
            out = result()
            if payoff is not None:
                payoff.verify(clock() - t0, len(out))
            n = len(out) - 1
            stats.verify_steps += 1
            stats.drafted += len(draft)
            stats.accepted += n
            issued += len(out)
            drafter.extend(out)
            if not blind:  # a chained step drafted on a wrong guess says nothing about the drafter
                drafter.feedback(len(draft), n)
            inflight, full = None, n == len(draft)
            if n:
                landed = done
            streak = streak + 1 if full else 0
            if ahead is not None:  # already on the device: next in line, chained further while guesses hold
                result, nxt, _, guess = ahead
                held = full and out[-1] == guess
                inflight, ahead = (result, nxt, clock(), not held), None
                if held:
                    ahead = chain(nxt)
            else:
                nxt = draft_now() if not cancelled() else []
                if nxt:
                    inflight = (runner.verify_async(nxt), nxt, clock(), False)
                    if full:  # the last draft held entirely: guess on
                        ahead = chain(nxt)
                else:
                    drafting, streak = False, 0
                    issue_plain()
            for t in out:
                done += 1
                yield t
                if done >= max_tokens:
                    return
            t_read = None
            continue
        if not pending:  # every token is on the host (after a cancel: the work is launched below otherwise)
            if drafting and not cancelled():
                draft = draft_now()
                if draft:
                    inflight = (runner.verify_async(draft), draft, clock(), False)
                    continue
            drafting = False
        if not drafting:
            issue_plain()
        token = (read if len(pending) > 1 or read_last is None else read_last)(pending.popleft())
        now = clock()
        if payoff is not None and t_read is not None:
            payoff.plain(now - t_read)
        drafter.append(token)
        done += 1
        if not drafting and drafter.ready():
            drafting = True
        if drafting and not pending and done < max_tokens and not cancelled():
            # the tail is known: the device gets its next work before the token goes to the caller
            draft = draft_now()
            if draft:
                inflight = (runner.verify_async(draft), draft, clock(), False)
            else:
                drafting, streak = False, 0
                issue_plain()
        yield token
        t_read = now
