"""Smoke test of the environment benchmark (``bench/env_bench.py --quick``): it runs end to end
against a real server subprocess and 64 concurrent clients see no errors. Timings are not
asserted (they depend on the machine's load); docs/benchmarks.md has the full run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _quick_bench(tmp_path, script: str, *args: str) -> dict:
    """``bench/SCRIPT --quick --json FILE ARGS``'s result file, after a clean exit."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--json",
                           str(out), *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


@pytest.mark.slow
def test_env_bench_quick(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "env_bench.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in-process: parse + 26 rules" in proc.stdout
    result = json.loads(out.read_text())
    assert result["in_process"]["us_per_password"] > 0
    assert len(result["in_process"]["rule_us"]) == 26
    assert [h["clients"] for h in result["http_submits"]] == [1, 8, 64]
    assert all(h["errors"] == 0 and h["submits"] > 0 for h in result["http_submits"])
    assert result["http_batch"]["checks_per_s"] > 0


@pytest.mark.slow
def test_bottom_states_bench_quick(tmp_path):
    """``bench/bottom_states_bench.py --quick``: keeping the bottom's states samples the same
    episodes, and scoring from them gives the numbers of a scoring that runs the bottom."""
    result = _quick_bench(tmp_path, "bottom_states_bench.py")
    assert result["same_episodes"] and result["episodes"] == 8
    assert max(result["largest_difference"].values()) < 1e-4


def _rollout_options_bench(tmp_path, *args: str) -> dict:
    return _quick_bench(tmp_path, "rollout_options_bench.py", *args)


@pytest.mark.slow
def test_prompt_prefix_bench_quick(tmp_path):
    """``bench/rollout_options_bench.py --quick`` (tiny, 8 games): the rollout with the shared
    prompt prefix and without play the same episodes, and the shared run prefills less."""
    result = _rollout_options_bench(tmp_path)
    shared, plain, _ = result["rows"]
    assert result["same_episodes"] == result["games"] == 8
    assert shared["shared_prefix_tokens"] == shared["prompt_tokens"] - 1
    assert shared["prefilled_columns"] < plain["prefilled_columns"]


@pytest.mark.slow
def test_inplace_kv_cache_bench_quick(tmp_path):
    """``--option inplace_kv_cache``: the same episodes, token and log-prob, with the cache that
    grows in place and with transformers' concatenating one."""
    result = _rollout_options_bench(tmp_path, "--option", "inplace_kv_cache")
    on, off, _ = result["rows"]
    assert on["inplace_kv_cache"] and not off["inplace_kv_cache"]
    assert result["same_episodes"] == result["same_logprobs"] == result["games"] == 8
    assert result["max_logprob_gap"] == 0.0
    assert on["prefilled_columns"] == off["prefilled_columns"]


@pytest.mark.slow
def test_preset_phases_bench_tiny(tmp_path):
    """``bench/preset_phases.py`` on the tiny preset: the Trainer's phases each timed once (two
    model loads, the zero-shot evaluation, the warm start, one epoch with its parts) and the
    whole run computed from them as its docstring says."""
    out = tmp_path / "phases.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "preset_phases.py"), "--preset",
                           "tiny", "--set", "warmstart_steps=2", "--set", "episodes_per_epoch=4",
                           "--set", "eval_episodes=4", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    names = [p["phase"] for p in result["phases"]]
    assert names == ["load_policy", "evaluate (zero-shot)", "warm_start", "load_policy",
                     "trainer init (all)", "epoch 1"]
    epoch = result["phases"][-1]
    assert epoch["rollout_seconds"] > 0 and epoch["update_seconds"] > 0
    assert epoch["seconds"] >= epoch["rollout_seconds"] + epoch["update_seconds"]
    seconds = {p["phase"]: p["seconds"] for p in result["phases"]}
    whole = result["projected_whole_run"]
    assert whole["epochs"] == 30  # the tiny preset's
    assert whole["seconds"] == pytest.approx(
        seconds["trainer init (all)"] + 2 * seconds["evaluate (zero-shot)"]
        + 30 * seconds["epoch 1"], abs=0.2)


@pytest.mark.slow
def test_rollout_memory_bench_quick(tmp_path):
    """``bench/rollout_memory.py --quick`` (tiny, 8 games): the turn cache was measured after
    the carried turns and the peak memory read."""
    result = _quick_bench(tmp_path, "rollout_memory.py")
    assert result["games"] == 8 and result["tokens"] > 0
    assert result["max_cache_gb_after_extend"] > 0
    assert result["peak_rss_above_start_gb"] is not None


def test_warmstart_passes_bench_quick(tmp_path):
    """``bench/warmstart_passes.py --quick`` (tiny, Wordle, 2 steps): every rows-per-pass
    setting trains from the same weights on the same batches, so their losses agree."""
    rows = _quick_bench(tmp_path, "warmstart_passes.py")["rows"]
    assert [r["rows_per_pass"] for r in rows] == [16, 8, 4, 2, 1]
    assert not rows[0]["shared_prompt"] and all(r["shared_prompt"] for r in rows[1:])
    for r in rows[1:]:
        assert r["losses"] == pytest.approx(rows[0]["losses"], abs=1e-3)


def test_password_failures_names_the_first_reason_that_fits(tmp_path):
    """``bench/password_failures.py`` on a made-up run: a CAPTCHA with digits appended to the
    same digit run is "own digits never changed"; its repair, a win; a mangled CAPTCHA, never in."""
    sys.path.insert(0, str(ROOT / "bench"))
    from password_failures import breakdown

    from tasks.password_game import make_instance
    from tasks.password_game.rules import digit_sum

    seed = next(s for s in range(100) if 0 < digit_sum(make_instance(s).captcha) <= 7)
    inst = make_instance(seed)
    pw = "Garden 997 ! may XXXV pepsi"
    fixed = f"Garden 99{7 - digit_sum(inst.captcha)} ! may XXXV pepsi"

    def episode(passwords, success=False):
        return {"epoch": 3, "seed": seed, "success": success, "num_revealed": 10,
                "passwords": passwords}
    games = [episode([pw, f"{pw} {inst.captcha}", f"{pw} {inst.captcha}"]),
             episode([pw, f"{pw} {inst.captcha}", f"{fixed} {inst.captcha} {inst.wordle}"], True),
             episode([pw, f"{pw} {inst.captcha[:-1]}"]),
             {**episode([pw]), "epoch": 1}]  # an earlier epoch: left out with --epochs 1
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(g) + "\n" for g in games))
    result = breakdown(tmp_path, epochs=1)
    assert result["reasons"] == {"won": 1, "CAPTCHA never in a password": 1,
                                 "digit sum broken, own digits never changed": 1}
    assert result["won_of"]["CAPTCHA with digits"] == [1, 3]


def test_captcha_turn_asks_the_model_for_the_experts_captcha_turn(tiny_dir, tmp_path):
    """``bench/captcha_turn.py``: each prompt is the expert's game up to the turn its CAPTCHA
    (with digits) goes in, whose answer holds the CAPTCHA and a digit sum of 25; a saved model
    then answers every one of those turns, from the command line."""
    sys.path.insert(0, str(ROOT / "bench"))
    from captcha_turn import captcha_turns

    from gamerl.config import get_config
    from gamerl.games.password_game import extract_password
    from gamerl.models.loading import load_tokenizer
    from tasks.password_game.rules import digit_sum

    cfg = get_config("tiny", model=str(tiny_dir), num_rules=12, max_steps=5, max_new_tokens=48,
                     max_context_tokens=3072, warmstart_demos="expert", warmstart_extra_prob=0.95)
    tokenizer = load_tokenizer(str(tiny_dir))
    turns = captcha_turns(cfg, tokenizer, 16)
    assert len(turns) >= 5
    for prompt, captcha, answer in turns:
        password = extract_password(answer)
        assert captcha in password and digit_sum(password) == 25, answer
        assert captcha in tokenizer.decode(prompt)  # the game showed it: rule 10 is revealed
    cfg.save(tmp_path / "config.json")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "captcha_turn.py"), str(tiny_dir),
                           "--config", str(tmp_path / "config.json"), "--games", "16", "--json",
                           str(tmp_path / "out.json")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = json.loads((tmp_path / "out.json").read_text())
    assert result["games"] == len(turns)
    assert 0 <= result["captcha_and_sum_25"] <= result["captcha_copied"] <= 1
