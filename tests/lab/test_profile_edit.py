"""Spec for lab.profile_edit's arithmetic: a run's busy time is the union of its kernels' intervals (overlapping
kernels, as PDL makes them, count once) and its idle gaps are the stretches no kernel covers."""

from lab.profile_edit import busy_and_gaps, gap_row


def test_busy_time_is_the_union_of_the_intervals_and_gaps_what_none_covers():
    events = [{"ts": 0, "dur": 10}, {"ts": 5, "dur": 10}, {"ts": 20, "dur": 5}, {"ts": 21, "dur": 1},
              {"ts": 40, "dur": 1}]
    span, busy, gaps = busy_and_gaps(events)
    assert (span, busy, gaps) == (41, 21, [5, 15])


def test_events_in_any_order_give_the_same_answer():
    events = [{"ts": 40, "dur": 1}, {"ts": 0, "dur": 10}, {"ts": 2, "dur": 3}]
    assert busy_and_gaps(events) == (41, 11, [30])


def test_gaps_are_counted_and_summed_by_size():
    assert gap_row([3, 4, 30, 2000]) == "2 / 7 | 0 / 0 | 1 / 30 | 0 / 0 | 0 / 0 | 1 / 2000"
