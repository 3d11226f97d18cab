"""Same machine, same seed, same thread count: the same numbers to the last digit. Two short
runs of the main command, in fresh processes (different hash seeds), give identical metrics
epoch by epoch and identical weights. Before seed_everything turned on torch's deterministic
algorithms on the CPU, two such runs parted in the last bits of the first update whenever
another job took CPU time (2 threads: atomic adds in thread order); docs/benchmarks.md says
where exactness ends (other CPUs, other thread counts, GPUs)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train(out: Path, hash_seed: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hash_seed,
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gamerl", "train", "--preset", "tiny", "--out", str(out),
         "--epochs", "2", "--episodes-per-epoch", "8", "--eval-episodes", "4", "--no-progress",
         "--wandb-mode", "disabled", "--set", "warmstart_steps=10", "--set", "eval_every=1"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


def results(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not (k.startswith(("perf/", "time")) or "seconds" in k
                                                or k.endswith("_per_s"))} for r in rows]


def test_two_runs_of_one_command_give_the_same_numbers(tmp_path):
    for name, hash_seed in (("a", "1"), ("b", "2")):
        proc = train(tmp_path / name, hash_seed)
        assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = results(tmp_path / "a"), results(tmp_path / "b")
    assert [r.get("kind") for r in a].count("epoch") == 2
    for row_a, row_b in zip(a, b):
        assert row_a == row_b, {k: (row_a.get(k), row_b.get(k)) for k in set(row_a) | set(row_b)
                                if row_a.get(k) != row_b.get(k)}
    assert len(a) == len(b)
    for name in ("last/model.safetensors", "zero_shot.json", "baseline.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    summary = [json.loads((tmp_path / n / "summary.json").read_text()) for n in "ab"]
    assert summary[0]["final"] == summary[1]["final"]
