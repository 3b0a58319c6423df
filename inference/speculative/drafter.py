"""Prompt-lookup drafter: propose the tokens that followed the last time the current tail appeared.

Code edits copy most of their input, so the tokens after an earlier occurrence of the last few
generated tokens are a good guess for what comes next. The drafter keeps, for every n-gram size
min_match..max_match, a hash map from n-gram to the end of its most recent occurrence that has a
continuation; appending a token adds one n-gram per size and a lookup tries the sizes from the
longest down. Both cost O(max_match) per token and O(max_draft) per draft: nothing grows with the
context.

It also keeps quiet when told: after a draft the decode loop turned down as not worth its verify step (1, 2, 4,
... up to max_hold tokens while drafts are turned down in a row), so on text that matches its past only by
accident the loop's cost check is asked rarely; after a verify step that accepted nothing only if max_backoff
says so (none by default). Not here: running the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class DraftConfig:
    max_draft: int = 15  # tokens drafted per verify step at most (the verify step feeds max_draft + 1)
    # tokens drafted (at most max_draft) unless the last verify step accepted its whole draft (8 columns, not 16):
    # the decode loop replayed over the edit workload's outputs (lab.probe_drafter --lags) with a 16-column step
    # at 2.36 plain steps gave 2.36x, 16 columns for every draft 2.30x; on an H200 the workload went 2.23x -> 2.39x
    short_draft: int = 7
    min_match: int = 2  # shortest tail n-gram that may start a draft
    # longest n-gram looked up (longer tails are matched on their last max_match tokens). 4 -> 6: fewer drafts from
    # a short tail's wrong occurrence (one H100, edit workload, best of 3: 2.56x -> 2.64x with start_near, 2.41x ->
    # 2.45x without; bench-results/h100-2026-11-26-session9/first9/)
    max_match: int = 6
    # most tokens to stay quiet after verify steps that accepted nothing (1, 2, 4, ... in a row): none, a miss costs
    # its verify step and a quiet spell the copies that start inside it (one H100, edit workload, best of 3: 64 -> 0
    # with max_hold 2.62x / 2.59x -> 2.66x / 2.67x, new code 1.10x / 1.09x -> 1.11x / 1.09x; .../session9/hold9/)
    max_backoff: int = 0
    max_hold: int = 64  # most tokens to stay quiet after drafts the decode loop's cost check turned down in a row
    cost_aware: bool = True  # the decode loop skips drafts while its measured costs say they do not pay
    # plain steps the decode loop keeps in flight between drafts while drafts are landing (a verify step accepted a
    # token within the last lag_window tokens; else the plain loop's): every step in flight when a match appears
    # is a token no draft can cover (simulated over the edit workload's outputs, lab.probe_drafter --lags: 8 in
    # flight 1.99x, 4 2.18x, 2 2.32x of plain decode); 2 keep the device as busy as 8 (H100, 135M model, plain steps
    # through this loop, first token read from a pinned copy: 2,350 tok/s either way, lab.probe_first_token)
    lag: int = 2
    lag_window: int = 64
    # the run's first token counts as a landed draft (DraftConfig.lag in flight from the start, not the loop's 8): an
    # edit's copy often starts within its first tokens (same H100 runs: 2.45x -> 2.64x with max_match 6, 2.41x ->
    # 2.56x with 4; new code 1.07x -> 1.10x)
    start_near: bool = True

    def __post_init__(self):
        if not (1 <= self.min_match <= self.max_match):
            raise ValueError(f"need 1 <= min_match <= max_match, got {self.min_match}, {self.max_match}")
        if self.max_draft < 1 or self.short_draft < 1:
            raise ValueError(f"need max_draft, short_draft >= 1, got {self.max_draft}, {self.short_draft}")
        if self.max_backoff < 0 or self.max_hold < 0:
            raise ValueError(f"need max_backoff, max_hold >= 0, got {self.max_backoff}, {self.max_hold}")
        if self.lag < 1 or self.lag_window < 0:
            raise ValueError(f"need lag >= 1 and lag_window >= 0, got {self.lag}, {self.lag_window}")

    @classmethod
    def parse(cls, spec: str) -> "DraftConfig":
        """The defaults with "field=value,..." overrides ("" for the defaults), e.g. "lag=1,short_draft=5";
        ValueError naming what is wrong."""
        base, kw = cls(), {}
        for item in filter(None, spec.split(",")):
            field, sep, text = item.partition("=")
            if not sep or not hasattr(base, field):
                raise ValueError(f"{item!r}: expected FIELD=VALUE with a DraftConfig field ({', '.join(vars(base))})")
            kind = type(getattr(base, field))
            if kind is bool:
                kw[field] = text in ("True", "true", "1")
                continue
            try:
                kw[field] = kind(text)
            except ValueError:
                raise ValueError(f"{item!r}: {field} takes {kind.__name__} values") from None
        return replace(base, **kw)


class PromptLookupDrafter:
    def __init__(self, tokens: list[int], config: DraftConfig | None = None):
        self.cfg = config or DraftConfig()
        self.tokens: list[int] = []
        # maps[n - min_match]: n-gram -> index of its last token, for occurrences followed by a token
        self.maps: list[dict[tuple[int, ...], int]] = [{} for _ in range(self.cfg.min_match, self.cfg.max_match + 1)]
        self.quiet = 0  # tokens left to stay quiet
        self.misses = 0  # consecutive verify steps that accepted nothing
        self.holds = 0  # consecutive drafts the decode loop turned down (they would not pay)
        self.extend(tokens)

    def append(self, token: int) -> None:
        toks = self.tokens
        toks.append(token)
        end = len(toks) - 2  # the n-grams ending just before the new token now have a continuation
        lo = self.cfg.min_match
        for i, m in enumerate(self.maps):
            n = lo + i
            if end + 1 < n:
                break
            m[tuple(toks[end + 1 - n:end + 1])] = end
        if self.quiet:
            self.quiet -= 1

    def extend(self, tokens) -> None:
        for t in tokens:
            self.append(t)

    def match(self) -> tuple[int, int] | None:
        """(n, index of the last token of the match) for the longest tail n-gram seen before, or None."""
        toks, lo = self.tokens, self.cfg.min_match
        for i in range(len(self.maps) - 1, -1, -1):
            n = lo + i
            if len(toks) < n:
                continue
            j = self.maps[i].get(tuple(toks[len(toks) - n:]))
            if j is not None:
                return n, j
        return None

    def propose(self, limit: int | None = None) -> list[int]:
        """Draft tokens for the current tail (at most max_draft and `limit`); [] when there is no
        match or the drafter is backing off."""
        return self.continuation(self.cfg.max_draft if limit is None else min(self.cfg.max_draft, limit))

    def continuation(self, k: int) -> list[int]:
        """k tokens that followed the tail's match (propose's draft, then what would come after it: the decode
        loop's chained verify steps); where they run into the tail itself (the match ends p tokens back, fewer
        than k follow it) the text is taken to repeat with period p, so a loop gets whole drafts, not the few
        tokens before the end. [] when there is no match or the drafter is backing off."""
        if self.quiet or k < 1:
            return []
        m = self.match()
        if m is None:
            return []
        toks, j = self.tokens, m[1]
        out = toks[j + 1:j + 1 + k]
        period = len(toks) - 1 - j  # the tail also ends `period` tokens back: the text repeats with this period
        while len(out) < k:  # the match's continuation runs into the tail: repeat it (a loop, a run of "= - ")
            out.append(out[len(out) - period])
        return out

    def ready(self) -> bool:
        """Whether propose() would draft now (a cheap check the decode loop makes after every token)."""
        return not self.quiet and self.match() is not None

    def feedback(self, drafted: int, accepted: int) -> None:
        """Report a verify step's outcome: a step that accepted nothing starts (or doubles) a quiet spell."""
        if drafted and not accepted:
            self.misses += 1
            self.quiet = max(self.quiet, min(self.cfg.max_backoff, 1 << (self.misses - 1)))
        elif accepted:
            self.misses = 0

    def hold(self) -> None:
        """The decode loop turned a draft down (not worth a verify step now): quiet for 1, 2, 4, ... tokens, up to
        max_hold, doubling with each draft turned down in a row."""
        self.holds += 1
        self.quiet = min(self.cfg.max_hold, 1 << (self.holds - 1))

    def release(self) -> None:
        """The decode loop let a draft through on its merits: the next turn-down starts a short spell again."""
        self.holds = 0
