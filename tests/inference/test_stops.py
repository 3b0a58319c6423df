"""Specs for inference.stops.StopStrings: output is cut right before the earliest stop string."""

import pytest

from inference.stops import StopStrings


def run(stops, deltas):
    """Feed deltas; returns (emitted text, hit, number of deltas consumed)."""
    s = StopStrings(stops)
    out = []
    for n, d in enumerate(deltas, 1):
        text, hit = s.push(d)
        out.append(text)
        if hit:
            return "".join(out), True, n
    return "".join(out) + s.flush(), False, len(deltas)


def test_stop_string_is_not_emitted():
    assert run(["\n\n"], ["def f():", "\n    pass", "\n\n", "print(1)"]) == ("def f():\n    pass", True, 3)


def test_stop_string_spanning_several_deltas():
    assert run(["</code>"], ["x = 1<", "/co", "de", ">more"]) == ("x = 1", True, 4)


def test_text_before_the_stop_in_the_same_delta_is_emitted():
    assert run(["STOP"], ["abcSTOPdef"]) == ("abc", True, 1)


def test_stop_at_the_very_start():
    assert run(["###"], ["###", "rest"]) == ("", True, 1)
    assert run(["###"], ["#", "#", "#"]) == ("", True, 3)


def test_possible_stop_prefix_is_held_back_then_released():
    s = StopStrings(["\n\n"])
    assert s.push("a\n") == ("a", False)  # "\n" could start "\n\n"
    assert s.push("b") == ("\nb", False)  # it did not
    assert s.push("\n") == ("", False)
    assert s.flush() == "\n"


def test_earliest_of_several_stops_wins():
    assert run(["world", "lo"], ["hello world"]) == ("hel", True, 1)
    assert run(["b", "abc"], ["xa", "bc"]) == ("x", True, 2)  # "abc" starts before "b"


def test_overlapping_stops_and_self_overlapping_prefixes():
    assert run(["aab"], ["a", "a", "a", "b"]) == ("a", True, 4)
    assert run(["abab"], ["ab", "a", "bab"]) == ("", True, 3)
    assert run(["ab", "bc"], ["a", "c"]) == ("ac", False, 2)


def test_no_stops_passes_text_straight_through():
    s = StopStrings([])
    assert s.push("anything\n\n") == ("anything\n\n", False)
    assert s.flush() == ""
    assert StopStrings([""]).push("x") == ("x", False)  # empty stop strings are ignored


def test_after_a_hit_nothing_more_is_emitted():
    s = StopStrings(["x"])
    assert s.push("axb") == ("a", True)
    assert s.push("more") == ("", True)
    assert s.flush() == ""


@pytest.mark.parametrize("cut", range(1, 12))
def test_any_split_of_the_stream_gives_the_same_cut(cut):
    text = "print(1)\n# END\nprint(2)"
    deltas = [text[i:i + cut] for i in range(0, len(text), cut)]
    emitted, hit, _ = run(["# END", "\n\n\n"], deltas)
    assert (emitted, hit) == ("print(1)\n", True)


def test_unicode_stop_strings():
    assert run(["🛑"], ["漢字", "🛑", "x"]) == ("漢字", True, 2)
