"""Smoke test of ``bench/decode_graphs_bench.py --quick``: on CPU it decodes the tiny model with
the growing cache and the static one, every call exactly the asked number of steps. The CUDA-graph
row needs a GPU (docs/benchmarks.md has one); speeds are not asserted."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_decode_graphs_bench_quick(tmp_path):
    out = tmp_path / "graphs.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "decode_graphs_bench.py"),
                           "--quick", "--json", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["model"] == "tiny" and result["device"] == "cpu"
    assert set(result["rows"]) == {"dynamic", "static"}  # no compile on a CPU
    for row in result["rows"].values():
        assert row["ms_per_step"] > 0 and len(row["seconds"]) == 1
    assert result["rows"]["dynamic"]["speedup_vs_dynamic"] == 1.0
