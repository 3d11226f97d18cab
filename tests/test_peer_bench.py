"""Smoke test of ``bench/peer_bench.py --quick``: our trainer and TRL's GRPOTrainer both run
the single-turn row end to end on CPU, the prompts TRL tokenized are ours, the multi-turn row
either ran or says why not, and the output ends with the peer-ratio line. Timings are not
asserted (the machine is shared); docs/benchmarks.md has the full run."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MISSING = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
RATIO = re.compile(r"^peer ratio \(TRL time per step / ours\): "
                   r"single-turn (\d+\.\d\d|n/a), multi-turn (\d+\.\d\d|n/a)$")


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"{' and '.join(MISSING)} not installed: the peer "
                    "benchmark needs TRL (pip install -e '.[bench]' installs trl==1.16.0)")
def test_peer_bench_quick(tmp_path):
    out = tmp_path / "peer.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "peer_bench.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=900,
                          cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    # Both single-turn table rows have numbers (a failed row prints "n/a (see below)" instead);
    # a table row is the label then spaces, a note is the label then a colon.
    for row in ("ours, single-turn", "TRL, single-turn"):
        (line,) = [ln for ln in lines if ln.startswith(row + " ")]
        assert "n/a" not in line and re.search(r"\d+\.\d\ds", line), line
    assert "TRL, single-turn: prompt token ids identical to ours" in proc.stdout
    # The multi-turn row: measured, or n/a with the reason above the ratio line.
    (multi,) = [ln for ln in lines if ln.startswith("TRL, 3 turns ")]
    match = RATIO.match(lines[-1])
    assert match, lines[-1]
    assert match.group(1) != "n/a"
    if match.group(2) == "n/a":
        assert "n/a" in multi and "TRL, 3 turns: n/a: " in proc.stdout
    result = json.loads(out.read_text())
    ours, trl = result["rows"][0], result["rows"][1]
    assert ours["summary"]["optimizer_steps"] == trl["summary"]["optimizer_steps"] == 2
    assert ours["summary"]["completions"] == trl["summary"]["completions"] == 8
