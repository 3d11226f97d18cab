"""The numbers the docs print, written by code so they cannot drift from it.

    python bench/doc_numbers.py quick               # rerun the quick run; exit 1 if the doc differs
    python bench/doc_numbers.py quick --write       # rerun it and rewrite its block in the doc
    python bench/doc_numbers.py main-run RUN_DIR...  # the main run's block: its runs over seeds
    python bench/doc_numbers.py main-run RUN_DIR... --write   # ... into README.md and results.md
    python bench/doc_numbers.py spread RUN_DIR RUN_DIR ...  # one preset over seeds: mean, min, max
    python bench/doc_numbers.py keep RUN_DIR NAME    # commit a run's summary: bench/results/NAME.json
    python bench/doc_numbers.py spread bench/results/A.json ... --write BLOCK DOC ...  # into docs

Every results table of the user docs is a marked block (``<!-- NAME:begin ... -->`` to
``<!-- NAME:end -->``) that this script writes; the blocks live in docs/results.md (README.md
repeats ``main-run``):

* ``quick-run`` (docs/results.md): a small deterministic training run (the tiny model, fixed
  seeds, one CPU thread, well under a minute) whose exact results the doc shows;
  tests/test_doc_numbers.py reruns it on every CI run and fails when the code no longer produces
  them. A change that moves them on purpose rewrites the block with ``--write`` in the same
  commit.
* ``main-run`` (README.md and docs/results.md, the same block): the held-out results of
  ``python -m gamerl train --preset tiny`` over seeds (``--seed 0`` to ``--seed 4``: the mean and
  min–max of each number; 30 epochs each, too long for CI), each time with the commit
  and the date they were measured at, so a reader can tell how old they are. The commit is the
  run's ``git_commit`` in summary.json when the trainer records one, else this checkout's HEAD,
  which must then be clean (``--allow-dirty`` says "plus uncommitted changes" instead); the
  machine is the runs' ``host`` in summary.json.
* ``spread ... --write BLOCK DOC`` (e.g. ``r12-preset`` in docs/results.md): one preset over
  seeds from committed run files (``bench/results/*.json``, made by ``keep``), every row, then
  mean, min and max, and one line under the table with the command, commit, date and machine.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from typing import Any
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS_PAGE = ROOT / "docs" / "results.md"  # the home of every results block
README = ROOT / "README.md"
QUICK_BLOCK, MAIN_BLOCK = "quick-run", "main-run"
# The quick run: the main job's pipeline (warm start, baseline, PPO, final evaluation, reference
# rows) at a size CI affords. One CPU thread: the results then do not depend on how many cores
# the machine has (a matmul's summation order does).
QUICK_SETTINGS = dict(epochs=2, episodes_per_epoch=4, eval_episodes=8, warmstart_steps=20,
                      warmstart_examples=32, warmstart_batch_size=8, minibatch_size=2,
                      ppo_epochs=1, seed=0, wandb_mode="disabled", progress=False)
COMMIT_LINE = re.compile(r"Measured at commit `([0-9a-f]{7,40})`( plus uncommitted changes)? "
                         r"on (\d{4}-\d{2}-\d{2})")


# ----------------------------------------------------------------------------- blocks in a doc

def _markers(name: str) -> tuple[re.Pattern, str]:
    return re.compile(rf"<!-- {name}:begin[^>]*-->\n(.*?)<!-- {name}:end -->", re.S), name


def read_block(text: str, name: str) -> str:
    """The text between a block's markers; ValueError if the doc has none."""
    match = _markers(name)[0].search(text)
    if match is None:
        raise ValueError(f"no <!-- {name}:begin --> ... <!-- {name}:end --> block")
    return match.group(1)


def replace_block(text: str, name: str, body: str) -> str:
    pattern = _markers(name)[0]
    if pattern.search(text) is None:
        raise ValueError(f"no <!-- {name}:begin --> ... <!-- {name}:end --> block")
    return pattern.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)] + body
                       + f"<!-- {name}:end -->", text, count=1)


# ----------------------------------------------------------------------------- tables

ROW_NAMES = {"zero_shot": "zero-shot (before the warm start)",
             "baseline": "baseline (after warm start, before PPO)",
             "final": "after PPO (last epoch)"}


def results_table(summary: dict) -> str:
    """Held-out results of a run's summary.json: zero-shot (when the run had a warm start),
    baseline, final and the reference rows."""
    num_rules = summary["config"]["num_rules"]
    lines = [f"| policy | reward | rules satisfied (of {num_rules}) | success | turns |",
             "|---|---|---|---|---|"]
    zero_shot = ["zero_shot"] if "zero_shot" in summary else []
    for key in [*zero_shot, "baseline", "final", *summary.get("references", [])]:
        row = summary[key]
        name = ROW_NAMES.get(key, row.get("label", key))
        lines.append(f"| {name} | {row['reward']:.2f} | {row['rules_satisfied']:.2f} | "
                     f"{row['success_rate']:.1%} | {row['turns']:.2f} |")
    return "\n".join(lines) + "\n"


def _seeds(summary: dict) -> str:
    first, last = summary["eval_seeds"]  # both played (summaries before 2026-11-25: half-open)
    if summary["config"]["eval_episodes"] == last - first:
        last -= 1
    return f"seeds {first:,}–{last:,}"


# ----------------------------------------------------------------------------- the quick run

def run_quick(out_dir: Path) -> str:
    """Train the quick run in ``out_dir`` and return its block's text."""
    import torch

    from gamerl.config import get_config
    from gamerl.core.trainer import Trainer
    from gamerl.tracking import read_jsonl

    torch.set_num_threads(1)
    cfg = get_config("tiny", out_dir=str(out_dir), **QUICK_SETTINGS)
    summary = Trainer(cfg, out_dir).train()
    epochs = [r for r in read_jsonl(out_dir / "metrics.jsonl") if r.get("kind") == "epoch"]
    ws = summary["warmstart"] or {}
    lines = [f"`bench/doc_numbers.py quick`: the tiny preset (Password Game, {cfg.num_rules} "
             f"rules, {cfg.max_steps} turns) with seed {cfg.seed}, a warm start of "
             f"{cfg.warmstart_steps} steps, {cfg.epochs} PPO epochs of {cfg.episodes_per_epoch} "
             f"games, {summary['final']['episodes']} held-out games ({_seeds(summary)}), one CPU "
             "thread.", "", results_table(summary),
             "| epoch | training reward | rules satisfied | KL to the reference (k3) |",
             "|---|---|---|---|"]
    for r in epochs:
        lines.append(f"| {r['epoch'] + 1} | {r['rollout/reward']:.4f} | "
                     f"{r['rollout/rules_satisfied']:.4f} | {r['adv/kl_ref_k3']:.6f} |")
    first, last = ws.get("loss_first", float("nan")), ws.get("loss_last", float("nan"))
    lines += ["", f"Warm-start loss (mean over its first 10 steps → its last 10): "
                  f"{first:.4f} → {last:.4f}.", "", f"Exact on: {machine_id()}."]
    return "\n".join(lines) + "\n"


# Exit code of ``quick`` when the doc's numbers were measured on another kind of machine: sampled
# tokens follow from float rounding, which differs between CPU instruction sets (AVX2 vs AVX-512)
# and torch builds, so exact agreement is only promised on the same kind of machine.
OTHER_MACHINE = 3
MACHINE_LINE = re.compile(r"^Exact on: (.+)\.$", re.MULTILINE)


def machine_id() -> str:
    """The CPU model and generation, the instruction set torch's kernels use, and the torch
    version."""
    import torch

    from gamerl.runs.code_version import cpu_generation, cpu_model

    generation = cpu_generation()
    generation = f" ({generation})" if generation else ""
    return (f"{cpu_model()}{generation}, {torch.backends.cpu.get_cpu_capability()}, "
            f"torch {torch.__version__}")


def cmd_quick(args: argparse.Namespace) -> int:
    doc = Path(args.doc)
    text = doc.read_text()
    here = machine_id()
    found = MACHINE_LINE.search(read_block(text, QUICK_BLOCK))
    if not args.write and found and found.group(1) != here:
        print(f"{doc}: the {QUICK_BLOCK} numbers were measured on {found.group(1)}; this "
              f"machine is {here}: exact agreement is not expected here (not rerun)")
        return OTHER_MACHINE
    with tempfile.TemporaryDirectory(prefix="quick_run_") as tmp:
        body = run_quick(Path(tmp) / "run")
    if args.write:
        doc.write_text(replace_block(text, QUICK_BLOCK, body))
        print(f"wrote the {QUICK_BLOCK} block of {doc}")
        return 0
    documented = read_block(text, QUICK_BLOCK)
    if documented == body:
        print(f"{doc}: the {QUICK_BLOCK} numbers match the code")
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        documented.splitlines(True), body.splitlines(True), f"{doc} (documented)",
        "this checkout (rerun)"))
    print(f"\n{doc}: the {QUICK_BLOCK} numbers differ from what the code produces now. If the "
          f"change is intended, rewrite them: python bench/doc_numbers.py quick --write")
    return 1


def spread_results_table(summaries: list[dict]) -> str:
    """``results_table`` over runs of one command with different seeds: each cell is the mean,
    then the min–max over the runs (a learning result is never one run: tiny's success ranged
    68–100% over three runs of one command)."""
    num_rules = summaries[0]["config"]["num_rules"]
    lines = [f"| policy | reward | rules satisfied (of {num_rules}) | success | turns |",
             "|---|---|---|---|---|"]
    zero_shot = ["zero_shot"] if all("zero_shot" in s for s in summaries) else []

    def cell(values: list[float], fmt: str) -> str:
        mean = sum(values) / len(values)
        return f"{mean:{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"

    for key in [*zero_shot, "baseline", "final", *summaries[0].get("references", [])]:
        rows = [s[key] for s in summaries]
        name = ROW_NAMES.get(key, rows[0].get("label", key))
        lines.append(f"| {name} | {cell([r['reward'] for r in rows], '.2f')} | "
                     f"{cell([r['rules_satisfied'] for r in rows], '.2f')} | "
                     f"{cell([r['success_rate'] for r in rows], '.1%')} | "
                     f"{cell([r['turns'] for r in rows], '.2f')} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the main run

def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def measured_at(summary: dict, summary_path: Path, allow_dirty: bool) -> str:
    commit = summary.get("git_commit")  # the run's own record (gamerl.runs.code_version)
    suffix = " plus uncommitted changes" if summary.get("git_dirty") else ""
    if commit is None:
        commit = _git("rev-parse", "--short", "HEAD")
        if _git("status", "--porcelain", "--untracked-files=no"):
            if not allow_dirty:
                raise SystemExit("the checkout has uncommitted changes, so HEAD does not say "
                                 "what code ran: commit first, or pass --allow-dirty")
            suffix = " plus uncommitted changes"
    date = summary.get("finished") or datetime.fromtimestamp(  # a kept file says; else the run's
        summary_path.stat().st_mtime, timezone.utc).date().isoformat()
    return f"Measured at commit `{commit[:7]}`{suffix} on {date}"


# Settings that do not change what the main run computes (where it logs, how it shows progress).
NOT_RESULTS = ("out_dir", "wandb_mode", "wandb_project", "progress", "device")


def settings_off_preset(config: dict, preset: str, task: str,
                        skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The settings (name -> the run's value) in which a run's config.json differs from
    ``get_config(preset, task=task)`` as the code sets it now, leaving out NOT_RESULTS, the
    seed and ``skip``. A setting the config lacks (added to TrainConfig after that run) counts
    as its default, which is what the code did before the setting existed."""
    from gamerl.config import get_config
    from gamerl.config.train_config import setting_fields

    defaults = {name: f.default for name, f in setting_fields().items()}
    wanted = get_config(preset, task=task).to_dict()
    return {k: config.get(k, defaults[k]) for k in sorted(wanted)
            if k not in NOT_RESULTS + ("seed",) + skip and config.get(k, defaults[k]) != wanted[k]}


def check_main_run_config(config: dict) -> None:
    """SystemExit unless ``config`` is the main job's: ``get_config("tiny")``, with any
    ``--seed`` (``settings_off_preset``); a setting removed since counts where it was on
    (``removed_in_use``)."""
    from gamerl.config.removed import removed_in_use

    differ = list(settings_off_preset(config, "tiny", "password_game")) + removed_in_use(config)
    if differ:
        raise SystemExit("this run is not `python -m gamerl train --preset tiny`: it differs in "
                         + ", ".join(f"{k}={config.get(k)!r}" for k in differ))


def _machines(summaries: list[dict]) -> str:
    """``; CPU, N cores`` for the runs' hosts (summary.json's ``host``), or "" without one."""
    hosts = sorted({f"{s['host'].get('cpu', '?')}, {s['host'].get('cpu_count', '?')} cores"
                    for s in summaries if s.get("host")})
    return "".join(f"; {h}" for h in hosts)


def main_run_block(run_dirs: list[Path], allow_dirty: bool = False) -> str:
    """The main job over seeds (``--seed 0`` ... ``--seed N-1``, one run each; run directories
    or their summaries kept under bench/results): mean and
    min–max per cell, the held-out games, the commit and the date of the latest run, and the
    machine."""
    paths = [_summary_file(str(d)) for d in run_dirs]
    summaries = [json.loads(p.read_text()) for p in paths]
    for summary in summaries:
        check_main_run_config(summary["config"])
    seeds = sorted(s["config"]["seed"] for s in summaries)
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"main-run: give runs with different seeds, not {seeds}")
    stamps = [measured_at(s, p, allow_dirty) for s, p in zip(summaries, paths)]
    commits = {stamp.split(" on ")[0] for stamp in stamps}
    if len(commits) != 1:
        raise SystemExit(f"main-run: the runs were measured at different commits: {commits}")
    latest = max(range(len(paths)), key=lambda i: (summaries[i].get("finished", ""),
                                                   paths[i].stat().st_mtime))
    if len(summaries) == 1:  # one run: its own numbers (not a spread: say so by its form)
        return (f"`python -m gamerl train --preset tiny`, {summaries[0]['final']['episodes']} "
                f"held-out games ({_seeds(summaries[0])}):\n\n{results_table(summaries[0])}\n"
                f"{stamps[0]}{_machines(summaries)}.\n")
    seed_text = (f"`--seed {seeds[0]}` to `--seed {seeds[-1]}`" if seeds == list(
        range(seeds[0], seeds[-1] + 1)) else "seeds " + ", ".join(map(str, seeds)))
    return (f"`python -m gamerl train --preset tiny`, {len(seeds)} runs ({seed_text}), "
            f"{summaries[0]['final']['episodes']} held-out games ({_seeds(summaries[0])}); "
            f"each cell the mean over the runs (min–max):\n\n{spread_results_table(summaries)}\n"
            f"{stamps[latest]}{_machines(summaries)}.\n")


def cmd_main_run(args: argparse.Namespace) -> int:
    body = main_run_block([Path(d) for d in args.run_dirs], args.allow_dirty)
    if not args.write:
        print(body, end="")
        return 0
    for doc in (README, RESULTS_PAGE):
        doc.write_text(replace_block(doc.read_text(), MAIN_BLOCK, body))
        print(f"wrote the {MAIN_BLOCK} block of {doc}")
    return 0


# ----------------------------------------------------------------------------- several seeds

STAGES = (("zero_shot", "zero-shot"), ("baseline", "after the warm start"),
          ("final", "after PPO"), ("final_greedy", "after PPO, greedy"))


def _columns(summaries: list[dict]) -> list[tuple[str, str, str]]:
    """The table's columns (key, header, format): the game's ``Task.report_columns``, headers
    filled in from the first run's config, keeping those every run's rows have (a summary
    written before a number existed lacks it)."""
    from gamerl.games import get_task

    config = summaries[0]["config"]
    task = get_task(config.get("task", "password_game"))  # summaries before tasks: the game
    return [(c.key, c.title(config), c.fmt) for c in task.report_columns
            if all(c.key in s["final"] for s in summaries)]


def spread_table(summaries: list[dict]) -> str:
    """Runs of one preset over several seeds (each a summary.json): a row per seed and stage,
    then the mean, min and max of each stage (each column on its own, a list-valued one such
    as the per-rule pass rates entry by entry), then the reference rows (one per seed where the
    runs' differ: Wordle's random words are drawn from the run's seed). The columns are the
    game's (``Task.report_columns``). The rows a learning result is reported with; a single
    run gets its own rows only, and its line says it is one seed."""
    columns = _columns(summaries)
    stages = [(k, name) for k, name in STAGES if all(k in s for s in summaries)]
    header = ["seed", "policy"] + [title for _, title, _ in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def cell(values: list, fmt: str, how) -> str:
        if isinstance(values[0], list):  # entry by entry, over the entries every row has
            return " ".join(fmt.format(how([v[i] for v in values]))
                            for i in range(min(map(len, values))))
        numbers = [v for v in values if v == v]  # NaN: nothing to count (Wordle's zero-shot)
        return fmt.format(how(numbers)) if numbers else "-"

    def row(seed: str, name: str, rows: list[dict], how) -> str:
        cells = [seed, name] + [cell([r[k] for r in rows], fmt, how) for k, _, fmt in columns]
        return "| " + " | ".join(cells) + " |"

    def first(values: list):
        return values[0]

    for s in summaries:
        for key, name in stages:
            lines.append(row(str(s["config"]["seed"]), name, [s[key]], first))
    spread = (("mean", lambda v: sum(v) / len(v)), ("min", min), ("max", max))
    for how_name, how in spread if len(summaries) > 1 else ():
        for key, name in stages:
            lines.append(row(how_name, name, [s[key] for s in summaries], how))
    shown = [k for k, _, _ in columns]
    for key in summaries[0].get("references", []):
        label = summaries[0][key].get("label", key)
        if all(s[key][k] == summaries[0][key][k] for s in summaries for k in shown):
            lines.append(row("", label, [summaries[0][key]], first))
        else:
            lines += [row(str(s["config"]["seed"]), label, [s[key]], first) for s in summaries]
    return "\n".join(lines) + "\n"


RESULTS = ROOT / "bench" / "results"


def _summary_file(path: str) -> Path:
    """A run directory's summary.json, or a summary kept under bench/results."""
    p = Path(path)
    return p / "summary.json" if p.is_dir() else p


def cmd_keep(args: argparse.Namespace) -> int:
    """A run's summary.json as bench/results/NAME.json, the committed file the docs' tables are
    written from, with the date it finished (the run directory is not committed)."""
    src = Path(args.run_dir) / "summary.json"
    summary = json.loads(src.read_text())
    summary.setdefault("finished", datetime.fromtimestamp(
        src.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d"))
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


def preset_overrides(config: dict) -> str:
    """`` --set NAME=VALUE`` for each setting in which a run's config differs from its preset as
    the code sets it now (so the command reproduces the run at this commit); "" for none."""
    try:
        differ = settings_off_preset(config, config.get("preset") or "tiny",
                                     config.get("task", "password_game"), skip=("preset", "task"))
    except ValueError:  # a preset this version no longer has
        return ""
    return "".join(f" --set {name}={json.dumps(value)}" for name, value in differ.items())


def stamp_line(summaries: list[dict]) -> str:
    """Under a table: the command, the commit, the date and the machine of its runs."""
    config = summaries[0]["config"]
    seeds = sorted(s["config"]["seed"] for s in summaries)
    task = "" if config.get("task", "password_game") == "password_game" else (
        f" --task {config['task']}")
    commits = sorted({(s.get("git_commit") or "?")[:7] + (" plus uncommitted changes"
                                                       if s.get("git_dirty") else "")
                      for s in summaries})
    dates, hosts = dates_and_hosts(summaries)
    return (f"`python -m gamerl train --preset {config.get('preset')}{task} --seed "
            f"{'/'.join(map(str, seeds))}{preset_overrides(config)}`"
            f"{' (one run)' if len(summaries) == 1 else ''}; "
            f"commit {', '.join(f'`{c}`' for c in commits)}; {dates}; {hosts}.\n")


def dates_and_hosts(summaries: list[dict]) -> tuple[str, str]:
    """``("2026-12-06 to 2026-12-07", "CPU, 2 cores; ...")``: when the runs finished and on
    which machines."""
    dates = sorted({s.get("finished", "?") for s in summaries})
    hosts = sorted({f"{s.get('host', {}).get('cpu', '?')}, {s.get('host', {}).get('cpu_count')}"
                    " cores" for s in summaries})
    return " to ".join(dict.fromkeys([dates[0], dates[-1]])), "; ".join(hosts)


def cmd_spread(args: argparse.Namespace) -> int:
    summaries = [json.loads(_summary_file(d).read_text()) for d in args.run_dirs]
    presets = {s["config"].get("preset") for s in summaries}
    if len(presets) != 1 or len({s["config"]["seed"] for s in summaries}) != len(summaries):
        raise SystemExit("spread: give runs of one preset with different seeds "
                         f"(presets {sorted(map(str, presets))})")
    body = spread_table(summaries) + "\n" + stamp_line(summaries)
    if not args.write:
        print(body, end="")
        return 0
    block, docs = args.write[0], args.write[1:]
    for doc in map(Path, docs):
        write_block(doc, block, body, f"python bench/doc_numbers.py spread "
                                      f"{' '.join(args.run_dirs)} --write {block} {doc.as_posix()}")
    return 0


def write_block(doc: Path, block: str, body: str, command: str) -> None:
    """``body`` into ``doc``'s block, its begin marker naming the ``command`` that wrote it, so
    a reader (and tests/test_docs.py) can redo it."""
    text = re.sub(rf"<!-- {block}:begin[^>]*-->",
                  f"<!-- {block}:begin: written by `{command}`; do not edit by hand -->",
                  doc.read_text(), count=1)
    doc.write_text(replace_block(text, block, body))
    print(f"wrote the {block} block of {doc}")


# ----------------------------------------------------------------------------- every preset

PRESETS_BLOCK = "presets"


def _headline(summaries: list[dict], stage: str) -> str:
    """``stage``'s row over the runs (the mean): the game's headline number, then success."""
    from gamerl.games import get_task

    config = summaries[0]["config"]
    task = get_task(config.get("task", "password_game"))
    columns = {c.key: c for c in task.report_columns}
    rows = [s[stage] for s in summaries]
    cells = []
    for key in [*task.headline, "success_rate"]:
        values = [r[key] for r in rows if key in r]
        if values and key in columns:
            words = "won" if key == "success_rate" else columns[key].title().split(" (")[0]
            cells.append(f"{columns[key].fmt.format(sum(values) / len(values))} {words}")
    return ", ".join(cells)


def presets_table(groups: list[list[dict]]) -> str:
    """One row per preset (each group: the kept runs of one command over seeds): the command,
    its test games, the headline numbers after the warm start and after PPO (means over the
    runs); under it one line with the commits, dates and machines of every row."""
    lines = ["| command | test games | after the warm start | after PPO |", "|---|---|---|---|"]
    commits = []
    for summaries in groups:
        config = summaries[0]["config"]
        task = config.get("task", "password_game")
        game = f"{config['num_rules']} rules" if task == "password_game" else task.capitalize()
        distinct = summaries[0].get("distinct_test_games")
        seeds = "/".join(str(s["config"]["seed"]) for s in summaries)
        command = (f"--preset {config['preset']}" + ("" if task == "password_game" else
                                                      f" --task {task}")
                   + f" --seed {seeds}{preset_overrides(config)}")
        lines.append(f"| `{command}` | {summaries[0]['final']['episodes']} of {game}"
                     + (f" ({distinct} distinct)" if distinct else "") + " | "
                     f"{_headline(summaries, 'baseline')} | {_headline(summaries, 'final')} |")
        commits.append(f"{config['preset']}{'' if task == 'password_game' else ' ' + task} "
                       + ", ".join(f"`{(s.get('git_commit') or '?')[:7]}`" for s in summaries))
    dates, hosts = dates_and_hosts([s for summaries in groups for s in summaries])
    return ("\n".join(lines) + "\n\n`python -m gamerl train` with the command shown; commits: "
            + "; ".join(commits) + f"; {dates}; {hosts}.\n")


def cmd_presets(args: argparse.Namespace) -> int:
    groups = [[json.loads(_summary_file(f).read_text()) for f in group.split(",")]
              for group in args.groups]
    body = presets_table(groups)
    if not args.write:
        print(body, end="")
        return 0
    write_block(README, PRESETS_BLOCK, body,
                f"python bench/doc_numbers.py presets {' '.join(args.groups)} --write")
    return 0


# ----------------------------------------------------------------------------- the peer benchmark

def peer_table(result: dict, path: str) -> str:
    """A ``bench/peer_bench.py --json`` file as a table (time per optimizer step, tokens per
    second, peak memory), the ratio, and the command, date and machine under it."""
    lines = ["| row | time / optimizer step | generated tok/s | trained tok/s | peak RSS |",
             "|---|---|---|---|---|"]
    for row in result["rows"]:
        if "error" in row:
            lines.append(f"| {row['label']} | not run | | | |")
            continue
        s = row["summary"]
        lines.append(f"| {row['label']} | {s['seconds_per_step']:.2f} s | "
                     f"{s['gen_tokens_per_s']:,.0f} | {s['trained_tokens_per_s']:,.0f} | "
                     f"{row['peak_rss_mib']:,.0f} MiB |")
    args, machine = result["args"], result["machine"]
    defaults = vars(_peer_bench().build_parser().parse_args([]))
    options = "".join(f" --{k.replace('_', '-')} {v}" for k, v in args.items()
                      if k in ("ppo_epochs", "rounds", "prompts", "group_size")
                      and v != defaults[k])
    ratio = result["peer_ratio"]["single_turn"]
    return ("\n".join(lines) + f"\n\nTRL's time per optimizer step over ours: **{ratio:.2f}**. "
            f"`python bench/peer_bench.py{options} --json {path}`; "
            + (f"commit `{machine['git_commit'][:7]}`; " if machine.get("git_commit") else "")
            + f"{result['date'][:10]}; "
            f"{machine.get('cpu', 'CPU not recorded')}, {machine['cpu_count']} cores, "
            f"torch {machine['torch']}.\n")


def _peer_bench():
    """bench/peer_bench.py as a module (its command line's defaults)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("peer_bench", ROOT / "bench" / "peer_bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("peer_bench", module)  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def cmd_peer(args: argparse.Namespace) -> int:
    body = peer_table(json.loads(Path(args.result).read_text()), args.result)
    if not args.write:
        print(body, end="")
        return 0
    block, doc = args.write
    write_block(Path(doc), block, body,
                f"python bench/doc_numbers.py peer {args.result} --write {block} {doc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quick", help="rerun the quick run and compare with (or --write) the doc")
    q.add_argument("--write", action="store_true")
    q.add_argument("--doc", default=str(RESULTS_PAGE))
    q.set_defaults(fn=cmd_quick)
    m = sub.add_parser("main-run", help="the main run's block from its run directories, one "
                                        "per seed")
    m.add_argument("run_dirs", nargs="+")
    m.add_argument("--write", action="store_true", help="into README.md and docs/results.md")
    m.add_argument("--allow-dirty", action="store_true")
    m.set_defaults(fn=cmd_main_run)
    s = sub.add_parser("spread", help="runs of one preset over several seeds: every row, then "
                                      "mean, min and max")
    s.add_argument("run_dirs", nargs="+", help="run directories or kept summaries (.json)")
    s.add_argument("--write", nargs="+", metavar=("BLOCK", "DOC"),
                   help="write the table into the block BLOCK of each DOC")
    s.set_defaults(fn=cmd_spread)
    r = sub.add_parser("presets", help="README's table: a row per preset, each from its kept "
                                       "runs")
    r.add_argument("groups", nargs="+", help="the runs of one preset, comma-separated")
    r.add_argument("--write", action="store_true", help="into README.md")
    r.set_defaults(fn=cmd_presets)
    p = sub.add_parser("peer", help="a peer_bench.py result file as a table")
    p.add_argument("result")
    p.add_argument("--write", nargs=2, metavar=("BLOCK", "DOC"))
    p.set_defaults(fn=cmd_peer)
    k = sub.add_parser("keep", help="a run's summary.json as bench/results/NAME.json")
    k.add_argument("run_dir")
    k.add_argument("name")
    k.set_defaults(fn=cmd_keep)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
