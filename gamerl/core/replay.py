"""Failure replay: play again the instances the policy recently failed, weighted by how badly.

Why: fresh instances are mostly ones the policy already handles (or cannot handle at all);
re-drawing the ones it recently got wrong focuses the gradient where it is still learning,
as prioritized experience replay does for value-based RL (Schaul et al., 2016). We replay the
*instance* (game, seed, opponent), not old trajectories: PPO is on-policy, so the episode is
played again by the current policy.

    replay = FailureReplay(capacity=1000)
    for inst, score in played:                                # after each epoch
        replay.add(inst, badness=1.0 - score)                 # score normalised to [0, 1]
    instances = replay.mix(fresh_instances, fraction=0.3, rng=rng)   # next epoch's batch

An instance is any JSON-able dict (``{"game": "connect_four", "seed": 123, "opponent":
"random"}``); identical dicts are one entry (the newest badness wins, and it counts as new).
Priority = (badness + eps) ** alpha: eps keeps an instance whose latest try went well (badness
0) drawable but rarely, alpha < 1 flattens the weights (alpha = 0 is uniform).
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections import OrderedDict
from typing import Any, Union

import numpy as np

Rng = Union[random.Random, np.random.Generator, None]


def _key(instance: dict[str, Any]) -> str:
    # Canonical JSON: key order does not matter; non-JSON-able instances fail here, at add().
    return json.dumps(instance, sort_keys=True, separators=(",", ":"))


class FailureReplay:
    """The ``capacity`` most recently added distinct instances, each with a badness >= 0."""

    def __init__(self, capacity: int = 1000, alpha: float = 1.0, eps: float = 1e-3):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if alpha < 0 or eps <= 0:
            raise ValueError(f"need alpha >= 0 and eps > 0, got alpha={alpha}, eps={eps}")
        self.capacity, self.alpha, self.eps = int(capacity), float(alpha), float(eps)
        # canonical JSON key -> (instance, badness), oldest first
        self._entries: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, instance: dict[str, Any]) -> bool:
        return _key(instance) in self._entries

    def items(self) -> list[tuple[dict[str, Any], float]]:
        """(instance, badness) pairs, oldest first (copies)."""
        return [(copy.deepcopy(i), b) for i, b in self._entries.values()]

    def add(self, instance: dict[str, Any], badness: float) -> None:
        """Insert ``instance`` as the newest entry; if it is already stored, replace its badness
        (and make it newest). Evicts the oldest entries beyond capacity."""
        badness = float(badness)
        if not math.isfinite(badness) or badness < 0:
            raise ValueError(f"badness must be a finite number >= 0, got {badness}")
        key = _key(instance)
        self._entries.pop(key, None)
        self._entries[key] = (copy.deepcopy(instance), badness)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def priorities(self) -> np.ndarray:
        """Unnormalised sampling weights, oldest entry first."""
        bad = np.fromiter((b for _, b in self._entries.values()), dtype=np.float64,
                          count=len(self._entries))
        return (bad + self.eps) ** self.alpha

    def sample(self, n: int, rng: Rng = None) -> list[dict[str, Any]]:
        """``n`` instances drawn with replacement, P(i) = priority_i / sum(priorities).

        ``rng``: a ``random.Random`` or a numpy ``Generator`` (seed it for reproducible runs);
        None uses a fresh unseeded ``random.Random``. Returns copies."""
        if n < 0:
            raise ValueError(f"cannot sample {n} instances")
        if n == 0:
            return []
        if not self._entries:
            raise ValueError("cannot sample from an empty replay buffer")
        entries = list(self._entries.values())
        weights = self.priorities()
        if isinstance(rng, np.random.Generator):
            idx = rng.choice(len(entries), size=n, p=weights / weights.sum()).tolist()
        else:
            rng = rng if rng is not None else random.Random()
            idx = rng.choices(range(len(entries)), weights=weights.tolist(), k=n)
        return [copy.deepcopy(entries[i][0]) for i in idx]

    def mix(self, fresh: list[dict[str, Any]], fraction: float = 0.3,
            rng: Rng = None) -> list[dict[str, Any]]:
        """``fresh`` with ``round(fraction * len(fresh))`` of its items (at random positions,
        rounding halves up) replaced by replayed instances; the batch size is unchanged.
        An empty buffer, or fraction 0, gives ``fresh`` unchanged (as a new list).

        With GRPO-style groups, mix the distinct instances *before* repeating each one
        ``group_size`` times, so a group stays one instance."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"replay fraction must be in [0, 1], got {fraction}")
        out = list(fresh)
        k = int(math.floor(fraction * len(out) + 0.5))
        if not self._entries or k == 0:
            return out
        if isinstance(rng, np.random.Generator):
            positions = rng.choice(len(out), size=k, replace=False).tolist()
        else:
            rng = rng if rng is not None else random.Random()
            positions = rng.sample(range(len(out)), k)
        for pos, inst in zip(positions, self.sample(k, rng)):
            out[pos] = inst
        return out

    def metrics(self) -> dict[str, float]:
        """Numbers for the epoch log."""
        bad = [b for _, b in self._entries.values()]
        return {"replay/size": float(len(bad)),
                "replay/mean_badness": float(np.mean(bad)) if bad else float("nan")}

    # ------------------------------------------------------------------ resume

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: settings and entries, oldest first."""
        return {"capacity": self.capacity, "alpha": self.alpha, "eps": self.eps,
                "entries": [[copy.deepcopy(i), b] for i, b in self._entries.values()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the entries (the settings of this object stay: a resumed run may change
        them; with a smaller capacity the oldest entries are dropped)."""
        self._entries.clear()
        for instance, badness in state["entries"]:
            self.add(instance, badness)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "FailureReplay":
        buf = cls(state["capacity"], state.get("alpha", 1.0), state.get("eps", 1e-3))
        buf.load_state_dict(state)
        return buf


__all__ = ["FailureReplay"]
