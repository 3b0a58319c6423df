"""Speculative decoding by prompt lookup (inference.speculative), on the CPU reference runner.

The drafter finds the longest recent n-gram match of the tail; a verify step feeds the last token
and k drafted ones in one forward and accepts the longest prefix that agrees with greedy; the
output is the non-speculative greedy output token for token, whatever the drafts, and EOS, stop
strings, max_tokens and cancellation end it at the same token."""

import random

import pytest

from inference.engine import Engine, FinishEvent
from inference.errors import ParamsError
from inference.prompts import Prompt
from inference.runner import ReferenceRunner, accepted_length
from inference.sampling import SamplingParams
from inference.speculative import DraftConfig, PromptLookupDrafter, SpecStats, speculative_tokens

SHAPES = ["tiny", "tiny-qwen3", "tiny-llama", "tiny-untied"]


# --- the drafter -------------------------------------------------------------------------------

def test_drafter_copies_what_followed_the_most_recent_occurrence_of_the_tail():
    d = PromptLookupDrafter([1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 6, 2, 3], DraftConfig(max_draft=3, min_match=2))
    assert d.propose() == [7, 8, 6]  # "2 3" last seen before 7 (the older one, before 4, loses to recency)


def test_drafter_prefers_the_longest_match_over_the_most_recent():
    toks = [5, 6, 7, 1, 9, 9, 0, 6, 7, 2, 2, 5, 6, 7]
    d = PromptLookupDrafter(toks, DraftConfig(max_draft=2, min_match=2, max_match=3))
    assert d.match() == (3, 2) and d.propose() == [1, 9]  # "5 6 7" beats the more recent "6 7"


def test_drafter_needs_min_match_tokens_and_respects_limits():
    d = PromptLookupDrafter([1, 2, 3, 4, 1], DraftConfig(max_draft=8, min_match=2))
    assert d.propose() == [] and not d.ready()  # only a 1-gram repeats
    d.append(2)
    assert d.ready() and d.propose() == [3, 4, 1, 2, 3, 4, 1, 2]  # the copy runs into the tail: it repeats
    assert d.propose(limit=2) == [3, 4]
    one = PromptLookupDrafter([1, 2, 3, 4, 1], DraftConfig(max_draft=8, min_match=1))
    assert one.propose() == [2, 3, 4, 1, 2, 3, 4, 1]


def test_a_loop_in_the_output_gets_whole_drafts():
    """A run like "= - = - = -" matches its own tail two tokens back: the continuation before the end is two
    tokens, the draft repeats them to max_draft (and further for a chained step's continuation)."""
    d = PromptLookupDrafter([7, 8, 9, 28, 464, 28, 464, 28], DraftConfig(max_draft=7, min_match=2, max_match=4))
    assert d.propose() == [464, 28, 464, 28, 464, 28, 464]
    assert d.continuation(10) == [464, 28] * 5


def test_drafter_matches_what_it_is_fed_one_token_at_a_time():
    rnd = random.Random(0)
    toks = [rnd.randrange(6) for _ in range(300)]
    cfg = DraftConfig(max_draft=4, min_match=2, max_match=4)
    inc = PromptLookupDrafter(toks[:1], cfg)
    for i in range(1, len(toks)):
        inc.append(toks[i])
        tail = toks[:i + 1]
        expect = []
        for n in range(4, 1, -1):  # brute force: the longest n, then the latest earlier occurrence
            if len(tail) <= n:
                continue
            ends = [j for j in range(n - 1, len(tail) - 1) if tail[j - n + 1:j + 1] == tail[-n:]]
            if ends:
                expect = tail[ends[-1] + 1:ends[-1] + 5]
                while len(expect) < 4:  # past the end: the text repeats with the match's period
                    expect.append(expect[len(expect) - (len(tail) - 1 - ends[-1])])
                break
        assert inc.propose() == expect, i


def test_drafter_backs_off_after_verify_steps_that_accept_nothing():
    d = PromptLookupDrafter([1, 2, 3, 1, 2], DraftConfig(max_backoff=4))
    assert d.ready()
    d.feedback(drafted=3, accepted=0)  # a first miss: quiet for the next token
    assert not d.ready() and d.propose() == []
    d.extend([3, 1, 2])
    assert d.ready()
    d.feedback(3, 0)
    d.feedback(3, 0)  # three misses in a row: quiet for 4 tokens
    for t in (3, 1, 2, 3):  # the tail matches earlier text all along
        assert not d.ready()
        d.append(t)
    assert d.ready()
    d.feedback(3, 2)  # an accepted token ends the streak
    assert d.misses == 0 and d.ready()


def test_by_default_a_miss_costs_its_verify_step_and_nothing_more():
    d = PromptLookupDrafter([1, 2, 3, 1, 2])
    d.feedback(drafted=3, accepted=0)
    assert d.ready() and d.propose()[:1] == [3]


def test_drafts_turned_down_in_a_row_hold_the_drafter_ever_longer_until_one_goes_through_on_its_merits():
    d = PromptLookupDrafter([1, 2] * 20, DraftConfig(max_hold=4))

    def next_token():  # the text keeps alternating: the tail always matches
        d.append(1 if d.tokens[-1] == 2 else 2)

    quiet = []
    for _ in range(4):
        d.hold()  # the decode loop turned a draft down
        n = 0
        while not d.ready():
            next_token()
            n += 1
        quiet.append(n)
    assert quiet == [1, 2, 4, 4]  # doubling, up to max_hold
    d.release()  # a draft went through because drafts pay again
    d.hold()
    assert not d.ready()
    next_token()
    assert d.ready()


def test_payoff_drafts_until_verify_steps_cost_more_than_the_tokens_they_yield():
    from inference.speculative.decode import Payoff

    p = Payoff()
    assert p.pays()  # nothing measured yet: try
    p.plain(0.001)
    p.verify(0.002, 3)  # 3 tokens for the price of 2 plain steps
    assert p.pays()
    for _ in range(5):
        p.verify(0.002, 1)  # then 1 token per verify step costing 2 plain steps
    assert not p.pays()
    assert p.pays(), "a draft turned down is followed by a probe: only verify steps can show drafts pay again"
    assert p.probing
    assert not p.pays()  # no verify step since: turned down again
    p.pays()
    for _ in range(5):
        p.verify(0.002, 4)  # the probes found drafts that pay
    assert p.pays() and not p.probing and p.pays()


class _Replay:
    """A runner answering from a known greedy output (output[0] is the prefill's), as the verify steps of a real
    one would: a verify step accepts the draft's prefix that agrees with the output."""
    max_draft, can_chain = 7, False

    def __init__(self, output):
        self.out, self.pos = output, 1

    def step(self):
        self.pos += 1
        return self.out[self.pos - 1] if self.pos - 1 < len(self.out) else 0

    def verify_async(self, draft, ahead_of=0):
        n = 0
        while n < len(draft) and self.pos + n < len(self.out) and draft[n] == self.out[self.pos + n]:
            n += 1
        res, self.pos = self.out[self.pos:self.pos + n + 1], self.pos + n + 1
        return lambda: list(res)


def test_fewer_plain_steps_in_flight_while_drafts_land_leave_more_of_a_copied_output_to_drafts():
    """Plain steps already in flight when the tail starts to match cannot be drafted: once drafts land the loop
    keeps DraftConfig.lag (2) in flight instead of its own 8, and a copy of the prompt costs fewer plain steps."""
    prompt = list(range(100, 160))
    output = [1, 2, 3] + prompt[10:30] + [4, 5, 6] + prompt[30:45] + [7, 8, 9, 10] + prompt[50:60]
    plain = {}
    for near in (8, 2):
        stats = SpecStats()
        drafter = PromptLookupDrafter(prompt, DraftConfig(cost_aware=False, lag=near))
        got = list(speculative_tokens(_Replay(output), output[0], drafter, len(output), int, stats, lambda: False, 8))
        assert got == output
        plain[near] = stats.plain_steps
    assert plain[2] < plain[8], plain


def test_a_copy_that_starts_with_the_run_finds_few_plain_steps_in_flight():
    """A run starts as if a draft had just landed (DraftConfig.start_near: DraftConfig.lag in flight, not the loop's
    8), so an edit whose copy of its input begins within its first tokens leaves fewer of them to plain steps."""
    prompt = list(range(100, 160))
    output = [1] + prompt[10:50]
    plain = {}
    for start_near in (True, False):
        stats = SpecStats()
        drafter = PromptLookupDrafter(prompt, DraftConfig(cost_aware=False, start_near=start_near))
        got = list(speculative_tokens(_Replay(output), output[0], drafter, len(output), int, stats, lambda: False, 8))
        assert got == output
        plain[start_near] = stats.plain_steps
    assert plain[True] <= DraftConfig().lag + 1 < plain[False], plain  # the tail must match (2 tokens), then drafts


def test_draft_config_parses_overrides_of_its_defaults():
    assert DraftConfig.parse("") == DraftConfig()
    assert DraftConfig.parse("lag=1,short_draft=5,start_near=false") == DraftConfig(lag=1, short_draft=5,
                                                                                   start_near=False)
    with pytest.raises(ValueError, match="lag"):
        DraftConfig.parse("lag=0")
    with pytest.raises(ValueError, match="'nope'"):
        DraftConfig.parse("nope")
    with pytest.raises(ValueError, match="lag takes int values"):
        DraftConfig.parse("lag=two")


def test_draft_config_is_checked():
    assert DraftConfig().lag == 2 and DraftConfig().lag_window == 64
    with pytest.raises(ValueError, match="lag"):
        DraftConfig(lag=0)
    with pytest.raises(ValueError):
        DraftConfig(min_match=3, max_match=2)
    with pytest.raises(ValueError):
        DraftConfig(max_draft=0)
    with pytest.raises(ValueError, match="max_hold"):
        DraftConfig(max_hold=-1)
    with pytest.raises(ParamsError, match="speculate"):
        SamplingParams(speculate="yes")


# --- the verify step on the reference runner ---------------------------------------------------

def test_accepted_length_is_the_agreeing_prefix():
    assert accepted_length([4, 5, 6], [4, 5, 6, 7]) == 3
    assert accepted_length([4, 5, 6], [4, 9, 6, 7]) == 1
    assert accepted_length([4], [3, 4]) == 0


def runner_for(synth_dir, shape, ctx=256):
    from inference.checkpoint import load_weights
    from inference.config import ModelConfig

    path = synth_dir(shape)
    cfg = ModelConfig.from_file(path / "config.json")
    return ReferenceRunner(cfg, load_weights(path, cfg), ctx)


def plain_greedy(runner, prompt, n):
    out = [int(runner.start(prompt, SamplingParams()))]
    out += [int(runner.step()) for _ in range(n - 1)]
    return out


class OracleDrafter(PromptLookupDrafter):
    """Drafts the known greedy continuation, wrong at chosen places: every accept/reject length."""

    def __init__(self, truth, prompt_len, lengths, wrong_at):
        super().__init__([], DraftConfig(cost_aware=False))
        self.truth, self.prompt_len, self.lengths, self.wrong_at = truth, prompt_len, lengths, wrong_at
        self.expected: list[int] = []

    def ready(self):
        return True

    def propose(self, limit=None):
        done = len(self.tokens) - self.prompt_len
        k = min(self.lengths[len(self.expected) % len(self.lengths)], limit)
        if k < 1:
            return []
        draft = list(self.truth[done:done + k])
        bad = self.wrong_at[len(self.expected) % len(self.wrong_at)]
        if bad < len(draft):
            draft[bad] = (draft[bad] + 1) % 100
        self.expected.append(min(bad, len(draft)))  # the accepted length this draft must get
        return draft


@pytest.mark.parametrize("shape", SHAPES)
def test_verify_steps_accept_exactly_the_agreeing_prefix_and_output_stays_greedy(synth_dir, shape):
    """Drafts of 1..8 tokens wrong at every position (or not at all) through the speculative loop: the
    accepted counts are the designed ones, and the tokens equal plain greedy decoding's: the cache rows
    of rejected tokens never leak into later steps."""
    runner = runner_for(synth_dir, shape)
    prompt = list(range(3, 40))
    truth = plain_greedy(runner, prompt, 80)
    drafter = OracleDrafter(truth, len(prompt), lengths=[8, 3, 1, 5, 8, 2], wrong_at=[8, 0, 4, 1, 7, 2, 5, 3, 6])
    drafter.extend(prompt)
    stats = SpecStats()
    first = runner.start(prompt, SamplingParams())
    got = list(speculative_tokens(runner, first, drafter, 80, int, stats, lambda: False, lag=4))
    assert got == truth
    accepted = [a for a in drafter.expected]
    assert stats.verify_steps == len(accepted) > 12 and stats.accepted == sum(accepted)
    assert stats.drafted > stats.accepted > 0


def test_the_device_gets_its_next_work_before_a_verify_steps_tokens_are_handed_out(synth_dir):
    """The loop launches the next verify step (or the next plain steps) as soon as a verify step's
    result is back, and only then yields that result's tokens: the caller's time overlaps the device's.
    The output is still plain greedy's."""
    runner = runner_for(synth_dir, "tiny")
    prompt = list(range(3, 40))
    truth = plain_greedy(runner, prompt, 60)
    log = []
    launch, step = runner.verify_async, runner.step

    def verify_async(draft):
        log.append("launch")
        result = launch(draft)
        return lambda: log.append("result") or result()

    runner.verify_async = verify_async
    runner.step = lambda: log.append("step") or step()
    drafter = OracleDrafter(truth, len(prompt), lengths=[4, 1, 3, 5], wrong_at=[9, 0, 9, 2])
    drafter.extend(prompt)
    first = runner.start(prompt, SamplingParams())
    got = []
    for t in speculative_tokens(runner, first, drafter, 60, int, SpecStats(), lambda: False, lag=4):
        got.append(t)
        log.append("token")
    assert got == truth
    results = [i for i, e in enumerate(log) if e == "result"]
    assert len(results) > 5
    for i in results:  # after each result: the next launch or step (unless the run is over) before a token
        after = [e for e in log[i + 1:] if e != "result"]
        if "launch" in after or "step" in after:
            assert after[0] in ("launch", "step"), log[i:i + 6]


def test_a_verify_step_after_plain_steps_goes_out_before_the_last_plain_token_is_handed_over():
    """When the tail read back starts to match, the plain steps in flight are read, and the verify step drafted
    from the full tail is launched before that last token goes to the caller (the device does not wait for the
    caller's time for it); after a verify step, the next launch also precedes its tokens."""
    prompt = list(range(10, 40))
    output = [5, 6, 7, 8] + list(range(12, 40)) + [9, 3, 4, 2, 1] + list(range(20, 30))
    runner, log = _Replay(output), []
    step, verify_async = runner.step, runner.verify_async

    def launch(draft, ahead_of=0):
        log.append("launch")
        result = verify_async(draft, ahead_of)
        return lambda: log.append("result") or result()

    runner.step, runner.verify_async = (lambda: log.append("step") or step()), launch
    drafter = PromptLookupDrafter(prompt, DraftConfig(cost_aware=False))
    got = []
    for t in speculative_tokens(runner, output[0], drafter, len(output), lambda t: log.append("read") or t,
                                SpecStats(), lambda: False, lag=4):
        got.append(t)
        log.append("token")
    assert got == output
    before = [max(j for j in range(i) if log[j] in ("read", "result", "token"))
              for i, e in enumerate(log) if e == "launch"]
    assert [log[j] for j in before].count("read") >= 2, log  # verify steps right after plain tokens
    assert all(log[j] != "token" for j in before), log


def test_a_plain_token_with_no_step_launched_behind_it_is_read_with_read_last():
    """read_last (the engine waits on the device there) takes exactly the plain tokens with nothing launched behind
    them: the last plain step before a verify step; every other plain token, with steps behind it, goes to read."""
    prompt = list(range(10, 40))
    output = [5, 6, 7, 8] + list(range(12, 40)) + [9, 3, 4, 2, 1] + list(range(20, 30))
    runner, unread, log = _Replay(output), [1], []  # the prefill's token is unread
    step = runner.step

    def counted():
        unread[0] += 1
        return step()

    def reader(kind):
        def read(token):
            unread[0] -= 1
            log.append((kind, unread[0]))
            return token
        return read

    runner.step = counted
    drafter = PromptLookupDrafter(prompt, DraftConfig(cost_aware=False))
    got = list(speculative_tokens(runner, output[0], drafter, len(output), reader("read"), SpecStats(),
                                  lambda: False, lag=4, read_last=reader("last")))
    assert got == output
    assert ("last", 0) in log and ("read", 1) in log, log
    assert all((kind == "last") == (behind == 0) for kind, behind in log), log


def test_drafts_are_short_until_a_whole_draft_holds_then_as_wide_as_the_runner():
    """DraftConfig.short_draft tokens (a verify step of 8 columns) unless the verify step before accepted its whole
    draft; then the runner's width (16 columns: 15 drafted)."""
    prompt = list(range(100, 160))
    output = [5, 6] + list(range(102, 125)) + [7] + list(range(126, 160))  # a copy, one token changed
    runner, steps = _Replay(output), []
    runner.max_draft = 15
    verify_async = runner.verify_async

    def logged(draft, ahead_of=0):
        out = verify_async(draft, ahead_of)()
        steps.append((len(draft), len(out) - 1))  # (drafted, accepted)
        return lambda: out

    runner.verify_async = logged
    drafter = PromptLookupDrafter(prompt, DraftConfig(cost_aware=False))
    got = list(speculative_tokens(runner, output[0], drafter, len(output), int, SpecStats(), lambda: False, lag=2))
    assert got == output
    assert steps[0][0] == 7, steps
    for (drafted, accepted), (nxt, _) in zip(steps, steps[1:]):
        assert nxt == (15 if accepted == drafted else 7) or nxt < 7, steps  # (< 7: the output's end)
    assert (15, 12) in steps, steps  # a long draft cut short by the changed token


class ChainingOracle(OracleDrafter):
    """OracleDrafter whose continuation past a draft is the known output, the guessed next token wrong every
    `wrong_guess`-th time (the chained verify step then drafts from a wrong tail)."""

    def __init__(self, *args, wrong_guess, **kwargs):
        super().__init__(*args, **kwargs)
        self.wrong_guess, self.calls = wrong_guess, 0

    def continuation(self, k):
        done = len(self.tokens) - self.prompt_len
        cont = list(self.truth[done:done + k])
        self.calls += 1
        if self.calls % self.wrong_guess == 0 and len(cont) > 1:
            cont[-1] = (cont[-1] + 1) % 100  # the chained draft's last token
            cont[min(len(cont) - 1, 8)] = (cont[min(len(cont) - 1, 8)] + 1) % 100
        return cont


@pytest.mark.parametrize("wrong_guess", [1000, 3, 2])
def test_chained_verify_steps_keep_the_output_greedy_whatever_they_were_drafted_from(synth_dir, wrong_guess):
    """A runner that can chain gets verify steps launched behind the one in flight (ahead_of > 0) while drafts
    hold entirely; each runs from the state the one before leaves, so the output is plain greedy's even where
    the chained draft was guessed wrong."""
    runner = runner_for(synth_dir, "tiny")
    prompt = list(range(3, 40))
    truth = plain_greedy(runner, prompt, 90)
    launches = []
    launch = runner.verify_async

    def verify_async(draft, ahead_of=0):
        launches.append(ahead_of)
        return launch(draft)  # the reference runner computes at once, from the state the last step left

    runner.verify_async, runner.can_chain, runner.max_draft = verify_async, True, 7  # the fast path's width
    drafter = ChainingOracle(truth, len(prompt), lengths=[7, 7, 3, 7], wrong_at=[9, 9, 9, 1], wrong_guess=wrong_guess)
    drafter.extend(prompt)
    stats = SpecStats()
    first = runner.start(prompt, SamplingParams())
    got = list(speculative_tokens(runner, first, drafter, 90, int, stats, lambda: False, lag=4))
    assert got == truth
    chained = sum(1 for a in launches if a > 0)
    assert chained >= 3 and stats.verify_steps == len(launches)
    assert all(a == 0 or 2 <= a <= 8 for a in launches)


# --- through the engine ------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["tiny", "tiny-qwen3"])
def engine(request, synth_dir):
    e = Engine.from_pretrained(synth_dir(request.param), device="cpu", max_context=512)
    e.draft_config = DraftConfig(min_match=1, max_backoff=0, cost_aware=False)  # many verify steps
    return e


def run(engine, prompt, **params):
    params.setdefault("speculate", True)  # off by default
    events = list(engine.generate(prompt, SamplingParams(**params)))
    fin = events[-1]
    assert isinstance(fin, FinishEvent)
    return [t for e in events[:-1] for t in e.token_ids], "".join(e.text for e in events[:-1]), fin.stats


REPEATING = Prompt.from_ids([random.Random(1).randrange(10, 1000) for _ in range(30)] * 3)


def test_speculation_left_to_the_engine_is_on_only_where_the_runner_keeps_its_kernels(engine):
    """speculate=None (the default): the CPU reference runner does not speculate; a runner whose speculating
    steps run its usual kernels (FastRunner.speculation_keeps_kernels) does, with the same output."""
    tokens, _, stats = run(engine, REPEATING, max_tokens=40, ignore_eos=True, speculate=None)
    assert not engine.speculates_by_default and not stats.speculative
    engine.runner.speculation_keeps_kernels = True
    try:
        spec_tokens, _, spec_stats = run(engine, REPEATING, max_tokens=40, ignore_eos=True, speculate=None)
    finally:
        del engine.runner.speculation_keeps_kernels
    assert spec_stats.speculative and spec_stats.verify_steps > 0 and spec_tokens == tokens


def test_speculative_greedy_equals_plain_greedy_with_verify_steps(engine):
    steps = 0
    for prompt in (REPEATING, Prompt.completion("def f(x):\n    return x\n" * 4)):
        plain = run(engine, prompt, max_tokens=80, ignore_eos=True, speculate=False)
        spec = run(engine, prompt, max_tokens=80, ignore_eos=True)
        assert spec[:2] == plain[:2]
        s = spec[2]
        assert s.speculative and not plain[2].speculative and plain[2].verify_steps == 0
        assert s.drafted >= s.accepted and s.effective_tok_s > 0 and s.decode_tok_s == s.effective_tok_s
        if s.verify_steps:
            assert s.accepted_per_verify == pytest.approx(s.accepted / s.verify_steps, abs=1e-3)
        steps += s.verify_steps
    assert steps > 0


def test_max_tokens_stop_ids_and_stop_strings_end_at_the_same_token(engine):
    ids, text, _ = run(engine, REPEATING, max_tokens=90, ignore_eos=True, speculate=False)
    for n in (1, 2, 7, 33):
        assert run(engine, REPEATING, max_tokens=n, ignore_eos=True)[0] == ids[:n]
    stop_id = ids[40]
    plain = run(engine, REPEATING, max_tokens=90, stop_token_ids=[stop_id], speculate=False)
    spec = run(engine, REPEATING, max_tokens=90, stop_token_ids=[stop_id])
    assert spec[:2] == plain[:2] and spec[2].finish_reason == plain[2].finish_reason == "stop"
    stop = text[len(text) // 2:len(text) // 2 + 3]
    plain = run(engine, REPEATING, max_tokens=90, ignore_eos=True, stop=[stop], speculate=False)
    spec = run(engine, REPEATING, max_tokens=90, ignore_eos=True, stop=[stop])
    assert spec[:2] == plain[:2] and spec[2].finish_reason == "stop" and spec[2].generated_tokens == plain[2].generated_tokens


def test_cancel_ends_a_speculative_run(engine):
    class CancelAfter:
        def __init__(self, n):
            self.n = n

        def is_set(self):
            self.n -= 1
            return self.n < 0

    events = list(engine.generate(REPEATING, SamplingParams(max_tokens=200, ignore_eos=True, speculate=True), cancel=CancelAfter(20)))
    assert events[-1].stats.finish_reason == "cancelled" and 0 < events[-1].stats.generated_tokens < 200


def test_sampled_and_penalised_requests_do_not_speculate(engine):
    assert not run(engine, REPEATING, max_tokens=20, temperature=0.7, seed=1)[2].speculative
    assert not run(engine, REPEATING, max_tokens=20, repetition_penalty=1.2)[2].speculative
    assert run(engine, REPEATING, max_tokens=20)[2].speculative


# --- the fast path's verify step (either family of k-column GEMVs), run eagerly on CPU ---------

@pytest.mark.slow
@pytest.mark.parametrize("gemv", ["triton", "mma"])
@pytest.mark.parametrize("shape", ["tiny-qwen3"])  # the decode kernels need head_dim >= 32
def test_fast_verifier_accepts_the_agreeing_prefix_with_either_gemv_family(synth_dir, shape, gemv):
    """FastVerifier (the k-column Triton GEMVs or the MMA GEMVs, and the k-column attention, under the Triton
    interpreter, float32) after a reference prefill: every accept length gives the reference greedy tokens and leaves the step state (token,
    position, embedding) where the next step expects it; the cache rows it wrote are the reference's."""
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")  # before kernels/ is imported (no GPU here)
    import torch

    from inference.reference import KVCache
    from inference.speculative.fast_verify import FastVerifier
    from kernels.decode_attention import AttentionWorkspace

    runner = runner_for(synth_dir, shape, ctx=300)
    cfg, model = runner.cfg, runner.model
    w = model.w
    prompt = list(range(5, 45))
    truth = plain_greedy(runner, prompt, 30)
    cache = KVCache(cfg, 300, "cpu", torch.float32)
    model.forward(torch.tensor(prompt), 0, cache)
    token = torch.tensor([truth[0]])
    pos = torch.tensor([len(prompt)], dtype=torch.int32)
    x = w.embed[truth[0]].float().clone()
    ws = AttentionWorkspace(cfg.num_heads, cfg.head_dim, 4, "cpu")
    v = FastVerifier(cfg, w, cache, model.cos, model.sin, token, pos, x, ws, gemv=gemv, buckets=(2, 4, 8))
    done = 1
    for k, wrong in [(7, 7), (3, 1), (5, 0), (1, 1)]:
        draft = list(truth[done:done + k])
        if wrong < k:
            draft[wrong] = (draft[wrong] + 1) % 100
        out = v.run_eager(draft)
        assert out == truth[done:done + min(wrong, k) + 1]
        done += len(out)
        assert int(token) == truth[done - 1] and int(pos) == len(prompt) + done - 1
        assert torch.equal(x, w.embed[truth[done - 1]].float())
    ref = KVCache(cfg, 300, "cpu", torch.float32)
    model.forward(torch.tensor(prompt + truth[:done - 1]), 0, ref)
    n = len(prompt) + done - 1
    torch.testing.assert_close(cache.k[:, :, :n], ref.k[:, :, :n], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(cache.v[:, :, :n], ref.v[:, :, :n], rtol=1e-4, atol=1e-4)
