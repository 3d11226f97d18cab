"""gamerl.core.replay: eviction, deduplication, sampling by priority, the exact mix fraction, the
empty buffer, and the resume round trip."""

import json
import random
from collections import Counter

import numpy as np
import pytest

from gamerl.core.replay import FailureReplay


def _inst(seed: int, game: str = "connect_four") -> dict:
    return {"game": game, "seed": seed, "opponent": "random"}


def test_capacity_evicts_oldest():
    buf = FailureReplay(capacity=3)
    for s in range(5):
        buf.add(_inst(s), 1.0)
    assert len(buf) == 3
    assert [i["seed"] for i, _ in buf.items()] == [2, 3, 4]
    assert _inst(1) not in buf and _inst(4) in buf


def test_duplicates_keep_newest_badness_and_become_newest():
    buf = FailureReplay(capacity=3)
    buf.add(_inst(0), 0.9)
    buf.add(_inst(1), 0.5)
    buf.add({"opponent": "random", "seed": 0, "game": "connect_four"}, 0.1)  # same, keys reordered
    assert len(buf) == 2
    assert [(i["seed"], b) for i, b in buf.items()] == [(1, 0.5), (0, 0.1)]
    buf.add(_inst(2), 1.0)
    buf.add(_inst(3), 1.0)  # evicts seed 1, the oldest, not seed 0 (refreshed)
    assert [i["seed"] for i, _ in buf.items()] == [0, 2, 3]


def test_bad_input():
    buf = FailureReplay()
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            buf.add(_inst(0), bad)
    with pytest.raises(TypeError):
        buf.add({"game": object()}, 1.0)  # not JSON-able
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1, random.Random(0))
    assert buf.sample(0) == []


@pytest.mark.parametrize("kind", ["random.Random", "numpy"])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_sampling_follows_priorities(kind, alpha):
    rng = random.Random(0) if kind == "random.Random" else np.random.default_rng(0)
    eps = 1e-3
    buf = FailureReplay(capacity=10, alpha=alpha, eps=eps)
    badness = [0.0, 0.1, 0.5, 1.0, 2.0]
    for s, b in enumerate(badness):
        buf.add(_inst(s), b)
    n = 20_000
    counts = Counter(i["seed"] for i in buf.sample(n, rng))
    w = np.array([(b + eps) ** alpha for b in badness])
    p = w / w.sum()
    expected = n * p
    observed = np.array([counts[s] for s in range(len(badness))])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    # 4 degrees of freedom: P(chi2 > 18.5) ~ 0.001. The badness-0 entry is drawn ~never.
    assert chi2 < 18.5, (observed, expected)
    assert np.allclose(observed / n, p, atol=0.015)


def test_sample_returns_copies():
    buf = FailureReplay()
    buf.add(_inst(7), 1.0)
    got = buf.sample(1, random.Random(0))[0]
    got["seed"] = 99
    assert buf.items()[0][0]["seed"] == 7


@pytest.mark.parametrize("n,fraction,k", [(10, 0.3, 3), (64, 0.3, 19), (7, 0.5, 4), (5, 0.3, 2),
                                          (8, 0.0, 0), (8, 1.0, 8), (1, 0.3, 0)])
def test_mix_replaces_exact_fraction(n, fraction, k):
    buf = FailureReplay()
    for s in range(1000, 1005):
        buf.add(_inst(s, "hex"), 1.0)
    fresh = [_inst(s) for s in range(n)]
    for rng in (random.Random(1), np.random.default_rng(1)):
        out = buf.mix(fresh, fraction, rng)
        assert len(out) == n
        replayed = [i for i in out if i["game"] == "hex"]
        assert len(replayed) == k
        # The fresh items that stay keep their relative order.
        kept = [i["seed"] for i in out if i["game"] != "hex"]
        assert kept == sorted(kept) and len(kept) == n - k
    assert fresh == [_inst(s) for s in range(n)]  # the input list is untouched


def test_mix_with_empty_buffer_returns_fresh():
    fresh = [_inst(s) for s in range(10)]
    out = FailureReplay().mix(fresh, 0.3, random.Random(0))
    assert out == fresh and out is not fresh
    with pytest.raises(ValueError):
        FailureReplay().mix(fresh, 1.5)


def test_mix_is_reproducible_with_a_seed():
    buf = FailureReplay()
    for s in range(50):
        buf.add(_inst(s, "othello"), s / 50)
    fresh = [_inst(s) for s in range(32)]
    assert buf.mix(fresh, 0.3, random.Random(5)) == buf.mix(fresh, 0.3, random.Random(5))


def test_state_round_trip():
    buf = FailureReplay(capacity=4, alpha=0.7, eps=0.01)
    for s, b in [(0, 0.2), (1, 0.9), (2, 0.0), (0, 0.6), (3, 1.0), (4, 0.3)]:
        buf.add(_inst(s), b)
    state = json.loads(json.dumps(buf.state_dict()))  # JSON-able
    again = FailureReplay.from_state_dict(state)
    assert (again.capacity, again.alpha, again.eps) == (4, 0.7, 0.01)
    assert again.items() == buf.items()
    assert again.sample(50, random.Random(3)) == buf.sample(50, random.Random(3))
    other = FailureReplay(capacity=2)
    other.load_state_dict(state)  # a smaller capacity keeps the newest
    assert other.items() == buf.items()[-2:]
    assert buf.metrics()["replay/size"] == 4.0
