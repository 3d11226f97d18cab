"""gamerl.notebook_utils: the numbers the notebook prints beside its results."""

from types import SimpleNamespace

import pytest

from gamerl.notebook_utils import held_out_change, mean_interval


def games(rules: list[int], won: list[bool]):
    return [SimpleNamespace(turns=[SimpleNamespace(stats={"rules_satisfied": r})], success=w)
            for r, w in zip(rules, won)]


def test_mean_interval_by_hand():
    # [1, 2, 3]: mean 2, sd 1 (n - 1), 1.96 / sqrt(3) = 1.13161
    assert mean_interval([1.0, 2.0, 3.0]) == pytest.approx((2.0, 0.86839, 3.13161), abs=1e-5)
    assert mean_interval([5.0]) == (5.0, 5.0, 5.0)


def test_a_change_within_the_noise_of_few_games_says_so():
    """8 games: 2.00 -> 2.38 rules overlap (the notebook's smoke budget printed this change
    with no word about noise); 3 of 3 wins after 0 of 3 is not separated by Wilson's interval
    either ([0, 56%] and [44%, 100%])."""
    before = games([2, 1, 3, 2, 2, 1, 3, 2], [False] * 8)
    after = games([3, 2, 3, 2, 2, 2, 3, 2], [False] * 8)
    line = held_out_change(before, after)
    assert line.startswith("rules satisfied 2.00 [") and "-> 2.38 [" in line
    assert "within the noise" in line and "over 8 held-out games" in line
    line = held_out_change(games([1, 2, 3], [False] * 3), games([5, 5, 5], [True] * 3))
    assert "rules satisfied 2.00 [0.87, 3.13] -> 5.00 [5.00, 5.00]" in line
    assert "success 0% [0%, 56%] -> 100% [44%, 100%]" in line and "within the noise" in line


def test_a_change_larger_than_the_noise_says_so():
    before = games([2] * 30 + [3] * 34, [False] * 64)
    after = games([6] * 60 + [5] * 4, [True] * 60 + [False] * 4)
    assert "larger than the noise" in held_out_change(before, after)
