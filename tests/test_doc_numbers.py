"""The numbers in the docs come from the code as it is (bench/doc_numbers.py): the quick run's
block in docs/results.md is rerun and compared exactly, and the main run's block (README.md
and docs/results.md) names the commit, date and machine it was measured at."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("doc_numbers", ROOT / "bench" / "doc_numbers.py")
doc_numbers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_numbers)


@pytest.mark.slow
def test_quick_run_numbers_match_the_docs(tiny_dir):
    """Reruns the deterministic quick run (GAMERL_TINY_DIR: the freshly built tiny model, the
    same as checkpoints/tiny) and compares every number with docs/results.md."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "doc_numbers.py"), "quick"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_SILENT": "true"})
    if proc.returncode == doc_numbers.OTHER_MACHINE:
        pytest.skip(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "numbers match the code" in proc.stdout


def _main_blocks() -> tuple[str, str]:
    return (doc_numbers.read_block((ROOT / "README.md").read_text(), "main-run"),
            doc_numbers.read_block((ROOT / "docs" / "results.md").read_text(), "main-run"))


def test_main_run_block_is_written_from_the_committed_run_files():
    """The README's table of the main job is what its five kept summaries give, to the digit."""
    files = sorted(doc_numbers.RESULTS.glob("tiny_s*.json"))
    assert len(files) == 5
    readme, _ = _main_blocks()
    assert doc_numbers.main_run_block(files) == readme


def test_main_run_numbers_carry_their_commit():
    readme, results = _main_blocks()
    assert readme == results  # one measurement, one text
    match = doc_numbers.COMMIT_LINE.search(readme)
    assert match, "the main-run block must say 'Measured at commit `SHA` on YYYY-MM-DD'"
    commit = match.group(1)
    git = ["git", "-C", str(ROOT)]
    if subprocess.run([*git, "rev-parse", "--git-dir"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: the commit cannot be looked up")
    found = subprocess.run([*git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True).stdout.strip() == "true"
    if found.returncode != 0 and shallow:
        pytest.skip(f"shallow clone: commit {commit} is not fetched")
    assert found.returncode == 0, f"the main-run block names {commit}, not a commit here"


def _summary(rows: dict, **extra) -> dict:
    from gamerl.config import get_config

    return {"config": get_config("tiny").to_dict(), "eval_seeds": [1_000_000, 1_000_127],
            "references": ["solver", "random"], **rows, **extra}


def _skeleton(block: str) -> str:
    """The block with its numbers, commit, date and machine taken out: its format."""
    block = doc_numbers.COMMIT_LINE.sub("Measured at commit C on D", block)
    block = re.sub(r"(Measured at commit C on D); .*\.$", r"\1; MACHINE.", block, flags=re.M)
    return re.sub(r"\d[\d,]*(\.\d+)?%?", "N", block)


def test_main_run_block_is_what_the_tool_writes(tmp_path):
    """The documented block has exactly the tool's format (so the next --write changes the
    numbers, the commit and the date, nothing else): runs over 5 seeds, each cell the mean
    and the min–max, the zero-shot row (the tiny preset has a warm start)."""
    readme, _ = _main_blocks()
    dirs = []
    for seed in range(5):
        row = {"reward": 1.0 + seed, "rules_satisfied": 2.0, "success_rate": 0.1 * seed,
               "turns": 3.0, "episodes": 128}
        summary = _summary({k: dict(row) for k in ("zero_shot", "baseline", "final", "solver",
                                                    "random")}, git_commit="abcdef1",
                           host={"cpu": "Some CPU", "cpu_count": 2})
        summary["config"]["seed"] = seed
        summary["solver"]["label"], summary["random"]["label"] = ("solver (all rules)",
                                                                  "random strings (floor)")
        (tmp_path / str(seed)).mkdir()
        (tmp_path / str(seed) / "summary.json").write_text(json.dumps(summary))
        dirs.append(tmp_path / str(seed))
    block = doc_numbers.main_run_block(dirs)
    assert "| after PPO (last epoch) | 3.00 (1.00–5.00) |" in block  # mean (min–max)
    assert "20.0% (0.0%–40.0%)" in block and "`--seed 0` to `--seed 4`" in block
    assert re.search(r"Measured at commit `abcdef1` on \S+; Some CPU, 2 cores\.\n$", block)
    single = doc_numbers.main_run_block(dirs[:1])  # one run: its own numbers, no spread
    assert "(min–max)" not in single and "| after PPO (last epoch) | 1.00 |" in single
    assert _skeleton(readme) in (_skeleton(block), _skeleton(single))


def test_main_run_block_refuses_another_run(tmp_path):
    summary = _summary({})
    summary["config"].update(epochs=2, eval_episodes=8, wandb_mode="disabled")
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SystemExit, match=r"not `python -m gamerl train --preset tiny`.*"
                                         r"epochs=2, eval_episodes=8$"):
        doc_numbers.main_run_block([tmp_path])


def test_main_run_of_an_older_version_lacks_later_settings(tmp_path):
    """A run whose config.json predates a setting (val_seed_start came later) ran with what is now
    its default: it is still the main job; so is one that has a setting removed since, off
    (removed.REMOVED_SETTINGS), but not one that had it on."""
    summary = _summary({"final": {"reward": 1.0, "rules_satisfied": 2.0, "success_rate": 0.0,
                                  "turns": 3.0, "episodes": 128}}, git_commit="abcdef1")
    summary["config"].pop("val_seed_start")
    doc_numbers.check_main_run_config(summary["config"])
    summary["config"]["val_seed_start"] = 3_000_000
    with pytest.raises(SystemExit, match="val_seed_start=3000000"):
        doc_numbers.check_main_run_config(summary["config"])
    summary["config"].update(val_seed_start=2_000_000, policy_loss="ppo_clip")
    doc_numbers.check_main_run_config(summary["config"])
    summary["config"]["policy_loss"] = "something_else"
    with pytest.raises(SystemExit, match="policy_loss='something_else'"):
        doc_numbers.check_main_run_config(summary["config"])


def test_blocks_are_replaced_between_their_markers():
    text = "a\n<!-- x:begin: note -->\nold\n<!-- x:end -->\nb\n"
    new = doc_numbers.replace_block(text, "x", "new 1\nnew 2\n")
    assert new == "a\n<!-- x:begin: note -->\nnew 1\nnew 2\n<!-- x:end -->\nb\n"
    assert doc_numbers.read_block(new, "x") == "new 1\nnew 2\n"
    with pytest.raises(ValueError, match="no <!-- y:begin"):
        doc_numbers.read_block(text, "y")


def test_spread_table_gives_every_seed_then_mean_min_max():
    def row(rules, success, rates):
        return {"reward": rules, "rules_satisfied": rules, "success_rate": success, "turns": 1.0,
                "per_rule_pass_rate": rates}

    runs = [{"config": {"num_rules": 2, "seed": seed}, "references": [],
             "zero_shot": row(1.0, 0.0, [1.0, 0.0]), "baseline": row(b, 0.5, [1.0, 0.5]),
             "final": row(f, 1.0, [1.0, r])} for seed, b, f, r in ((0, 1.5, 2.0, 1.0),
                                                                 (1, 1.0, 1.5, 0.5))]
    lines = doc_numbers.spread_table(runs).splitlines()
    assert len(lines) == 2 + 6 + 9  # header, 2 seeds x 3 stages, mean/min/max x 3 stages
    assert "| 1 | after the warm start | 1.00 | 1.00 | 50.0% | 1.00 | 1.00 0.50 |" in lines
    assert "| mean | after PPO | 1.75 | 1.75 | 100.0% | 1.00 | 1.00 0.75 |" in lines
    assert "| min | after PPO | 1.50 | 1.50 | 100.0% | 1.00 | 1.00 0.50 |" in lines
    assert "| max | after the warm start | 1.50 | 1.50 | 50.0% | 1.00 | 1.00 0.50 |" in lines


def test_spread_table_gives_wordle_runs_their_own_columns():
    """A Wordle run's summary has no rules or per-rule rates: its columns are its own metrics
    (invalid and repeated guesses, best greens, wins), and the random-words reference, drawn
    from each run's seed, gets a row per seed."""
    def row(reward, invalid, greens, won):
        return {"reward": reward, "success_rate": won, "turns": 6.0, "invalid_rate": invalid,
                "repeat_rate": 0.1, "best_greens": greens}

    runs = [{"config": {"seed": seed, "task": "wordle"}, "references": ["random"],
             "zero_shot": row(-0.6, 1.0, 0.0, 0.0), "baseline": row(0.1, 0.1, 1.0, 0.0),
             "final": row(0.3, f, g, 0.0), "random": {**row(0.35, 0.0, r, 0.004),
                                                       "label": "random answer words"}}
            for seed, f, g, r in ((0, 0.02, 1.3, 1.25), (1, 0.04, 1.4, 1.13))]
    lines = doc_numbers.spread_table(runs).splitlines()
    assert lines[0] == ("| seed | policy | reward | invalid guesses | repeated guesses | "
                        "best greens (of 5) | won |")
    assert "| mean | after PPO | 0.30 | 3.0% | 10.0% | 1.35 | 0.0% |" in lines
    assert "| 0 | random answer words | 0.35 | 0.0% | 10.0% | 1.25 | 0.4% |" in lines
    assert "| 1 | random answer words | 0.35 | 0.0% | 10.0% | 1.13 | 0.4% |" in lines


def test_a_nan_column_is_a_dash_and_stays_out_of_the_mean():
    """Wordle's board-reading columns are NaN where no game had a second valid guess (a
    zero-shot model's): the table writes "-" there, not "nan%", and a stage's mean, min and
    max are over the runs that have a number."""
    nan = float("nan")

    def row(fits):
        return {"reward": 0.1, "success_rate": 0.0, "turns": 6.0, "invalid_rate": 0.0,
                "repeat_rate": 0.0, "best_greens": 1.0, "kept_greens_rate": fits,
                "fits_marks_rate": fits}

    runs = [{"config": {"seed": seed, "task": "wordle"}, "references": [],
             "zero_shot": row(nan), "baseline": row(b), "final": row(nan if seed else 0.5)}
            for seed, b in ((0, 0.25), (1, 0.75))]
    lines = doc_numbers.spread_table(runs).splitlines()
    assert "| 0 | zero-shot | 0.10 | 0.0% | 0.0% | 1.00 | - | - | 0.0% |" in lines
    assert "| mean | after the warm start | 0.10 | 0.0% | 0.0% | 1.00 | 50.0% | 50.0% | 0.0% |" in lines
    assert "| max | after PPO | 0.10 | 0.0% | 0.0% | 1.00 | 50.0% | 50.0% | 0.0% |" in lines
    assert not any("nan" in line for line in lines)


def test_spread_table_takes_an_openspiel_runs_columns_from_its_game():
    """The columns come from the game (``Task.report_columns``): an OpenSpiel run (no rules,
    no greens; its ``per_game`` breakdown is not a column) gets won / drawn / lost / illegal,
    where the table once raised KeyError looking for Wordle's columns."""
    def row(win, illegal):
        return {"reward": win, "success_rate": win, "turns": 4.0, "win_rate": win,
                "draw_rate": 0.0, "loss_rate": 1.0 - win, "illegal_rate": illegal,
                "per_game": {"tic_tac_toe": {"win": 1, "games": 2}}}

    runs = [{"config": {"seed": seed, "task": "openspiel"}, "references": ["random"],
             "baseline": row(0.25, 0.5), "final": row(w, 0.0), "random": row(0.5, 0.0)}
            for seed, w in ((0, 0.5), (1, 0.75))]
    lines = doc_numbers.spread_table(runs).splitlines()
    assert lines[0] == ("| seed | policy | reward | won | drawn | lost | illegal answers | "
                        "turns |")
    assert "| mean | after PPO | 0.62 | 62.5% | 0.0% | 37.5% | 0.0% | 4.00 |" in lines
    assert "|  | random | 0.50 | 50.0% | 0.0% | 50.0% | 0.0% | 4.00 |" in lines
    assert len(lines) == 2 + 4 + 6 + 1  # no zero-shot stage: these runs had no warm start


def test_machine_id_names_the_cpu_generation():
    """Two Xeon generations with one model name sampled different quick runs: the machine line
    names the family and model where /proc/cpuinfo has them, so the other one skips."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists() or "cpu family" not in cpuinfo.read_text():
        pytest.skip("no cpu family in /proc/cpuinfo here")
    first = cpuinfo.read_text().split("\n\n")[0]
    family = re.search(r"^cpu family\s*:\s*(\S+)", first, re.MULTILINE).group(1)
    model = re.search(r"^model\s*:\s*(\S+)", first, re.MULTILINE).group(1)
    assert f"(family {family} model {model})" in doc_numbers.machine_id()
    block = doc_numbers.read_block((ROOT / "docs" / "results.md").read_text(), "quick-run")
    assert re.search(r"\(family \S+ model \S+\)", doc_numbers.MACHINE_LINE.search(block).group(1))


def test_a_kept_run_is_written_into_a_doc_block_with_its_command_commit_date_and_machine(
        tmp_path, monkeypatch):
    """keep copies a run's summary into bench/results with the day it finished; spread --write
    puts its table, and one line saying how it was made, between a doc's block markers."""
    from gamerl.config import get_config

    monkeypatch.setattr(doc_numbers, "RESULTS", tmp_path)
    row = {"reward": 1.0, "rules_satisfied": 2.0, "success_rate": 0.5, "turns": 3.0,
           "episodes": 64, "per_rule_pass_rate": [1.0, 0.5]}
    for seed in (0, 1):
        run = tmp_path / f"run{seed}"
        run.mkdir()
        summary = _summary({k: dict(row) for k in ("zero_shot", "baseline", "final", "solver",
                                                    "random")}, git_commit="abcdef1234",
                           host={"cpu": "Some CPU", "cpu_count": 2})
        summary["config"] = {**get_config("smollm2-135m-r12").to_dict(), "seed": seed}
        (run / "summary.json").write_text(json.dumps(summary))
        assert doc_numbers.main(["keep", str(run), f"kept{seed}"]) == 0
    kept = json.loads((tmp_path / "kept0.json").read_text())
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", kept["finished"])
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- r12:begin -->\nold\n<!-- r12:end -->\nafter\n")
    assert doc_numbers.main(["spread", str(tmp_path / "kept0.json"), str(tmp_path / "kept1.json"),
                             "--write", "r12", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("before\n<!-- r12:begin: written by `python bench/doc_numbers.py "
                           f"spread {tmp_path / 'kept0.json'} {tmp_path / 'kept1.json'} --write "
                           f"r12 {doc.as_posix()}`; do not edit by hand -->\n| seed | policy |")
    assert "old" not in text
    assert ("`python -m gamerl train --preset smollm2-135m-r12 --seed 0/1`; commit `abcdef1`; "
            f"{kept['finished']}; Some CPU, 2 cores.") in text


def test_the_stamp_names_the_settings_a_run_changed_from_its_preset():
    """A run made with --set, or before its preset changed, reads as the command that makes it
    now: the preset plus the settings it differs in."""
    from gamerl.config import get_config

    summary = {"config": {**get_config("smollm2-135m-r12").to_dict(), "seed": 0, "lr": 5e-05},
               "git_commit": "abcdef1234", "finished": "2026-12-07",
               "host": {"cpu": "Some CPU", "cpu_count": 2}}
    assert doc_numbers.stamp_line([summary]).startswith(
        "`python -m gamerl train --preset smollm2-135m-r12 --seed 0 --set lr=5e-05` (one run); ")
    second = {**summary, "config": {**summary["config"], "seed": 1}}
    assert doc_numbers.stamp_line([summary, second]).startswith(
        "`python -m gamerl train --preset smollm2-135m-r12 --seed 0/1 --set lr=5e-05`; ")
