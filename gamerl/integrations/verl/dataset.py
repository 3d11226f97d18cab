"""Export game seeds as verl 0.9 RL datasets (parquet), one row per episode to play.

    python -m gamerl.integrations.verl.dataset --game password_game --train 10000 --val 256 \\
        --out data/password_game

writes ``train.parquet`` and ``val.parquet`` in ``--out``. Each row is what
``verl.utils.dataset.rl_dataset.RLHFDataset`` reads and ``GameAgentLoop`` plays:

    data_source   "game_rl/<game>"           validation metrics are grouped by it
    agent_name    "game_rl"                  which agent loop plays the row
    prompt        [{"role": "system", ...}, {"role": "user", "content": "<Title> #<seed>\\n<obs>"}]
    ability       "game"
    reward_model  {"style": "rule", "ground_truth": <secret>}
    extra_info    {"index": i, "split": "train"|"val", "game": <game>, "seed": <seed>,
                   "game_config": <JSON of the full game config>, "answer": <secret>}

The secret (Wordle's answer, a reference Password Game solution from the solver) is VISIBLE in the
row, and the seed is in the prompt's first line: no two rows look alike, so verl's validation
table and ``trainer.validation_data_dir`` dumps show which game each sample was. The agent loop
never shows the secret to the model.

Seeds: training rows use ``--train-seed-start`` + 0, 1, 2, ... (default 0); validation rows start
at ``--val-seed-start`` (default 1,000,000, our own trainer's held-out seeds) and skip a seed whose
secret an earlier validation row already has (Wordle has 2,309 answers: 256 consecutive seeds
would repeat about a dozen), so the validation set is fixed, diverse and disjoint from training.
Several games (``--game password_game,wordle``) give that many rows of each, in one file.

``--game-config`` is JSON merged into the bridge's default game config (see ``games.py``): e.g.
``'{"num_rules": 8, "max_steps": 12}'`` for a short Password Game. With several games, key it by
game: ``'{"password_game": {"max_steps": 12}, "wordle": {"hard_mode": true}}'``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from .games import AGENT_NAME, GAMES, get_game

__all__ = ["AGENT_NAME", "DEFAULT_VAL_SEED_START", "build_rows", "main", "overrides_for",
           "train_seeds", "val_seeds", "write_parquet"]

DEFAULT_VAL_SEED_START = 1_000_000  # = gamerl.config.TrainConfig.eval_seed_start


def overrides_for(game: str, overrides: Optional[dict]) -> dict:
    """The part of a ``--game-config`` for ``game``: the entry under its name when the JSON is
    keyed by game names, else the whole JSON."""
    overrides = dict(overrides or {})
    by_game = [k for k in overrides if k in GAMES]
    if not by_game:
        return overrides
    if len(by_game) != len(overrides):
        others = sorted(set(overrides) - set(by_game))
        raise ValueError(f"--game-config mixes game names {by_game} with config keys {others}")
    return dict(overrides.get(game) or {})


def train_seeds(count: int, start: int = 0) -> list[int]:
    return list(range(start, start + count))


def val_seeds(game: str, count: int, start: int = DEFAULT_VAL_SEED_START,
              config_overrides: Optional[dict] = None) -> list[int]:
    """``count`` seeds from ``start`` up, skipping any whose secret is already taken."""
    spec = get_game(game)
    config = spec.config(config_overrides)
    seen: set[str] = set()
    seeds: list[int] = []
    seed = start
    while len(seeds) < count:
        secret = spec.secret(seed, config)
        if secret not in seen:
            seen.add(secret)
            seeds.append(seed)
        seed += 1
        if seed - start > 100 * count + 10_000:
            raise RuntimeError(f"{game}: cannot find {count} seeds with distinct secrets")
    return seeds


def build_rows(game: str, seeds: Iterable[int], split: str,
               config_overrides: Optional[dict] = None, system_prompt: Optional[str] = "default",
               index_start: int = 0) -> Iterator[dict[str, Any]]:
    """verl rows for ``seeds`` of ``game`` (see the module docstring for the schema)."""
    spec = get_game(game)
    config = spec.config(config_overrides)
    config_json = json.dumps(spec.config_dict(config_overrides), sort_keys=True)
    for i, seed in enumerate(seeds, start=index_start):
        env = spec.make_env(config)
        try:
            obs = env.reset(seed)
        finally:
            env.close()
        secret = spec.secret(seed, config)
        yield {
            "data_source": f"game_rl/{game}",
            "agent_name": AGENT_NAME,
            "prompt": spec.initial_messages(seed, obs, system_prompt),
            "ability": "game",
            "reward_model": {"style": "rule", "ground_truth": secret},
            "extra_info": {"index": i, "split": split, "game": game, "seed": int(seed),
                           "game_config": config_json, "answer": secret},
        }


def _schema():
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema([
        ("data_source", pa.string()),
        ("agent_name", pa.string()),
        ("prompt", pa.list_(message)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64()), ("split", pa.string()),
                                  ("game", pa.string()), ("seed", pa.int64()),
                                  ("game_config", pa.string()), ("answer", pa.string())])),
    ])


def write_parquet(rows: Sequence[dict], path: str | Path) -> Path:
    """Write rows with a fixed schema (the same for every game, so files can be mixed)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit("writing parquet needs pyarrow: pip install -e '.[verl]'") from e
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=_schema()), path)
    return path


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m gamerl.integrations.verl.dataset",
        description="Write verl train/val parquet files of game episodes (one row per seed).")
    p.add_argument("--game", default="password_game",
                   help=f"game, or several separated by commas ({', '.join(GAMES)})")
    p.add_argument("--train", type=int, default=10_000, help="training rows per game")
    p.add_argument("--val", type=int, default=256, help="validation rows per game")
    p.add_argument("--out", default="data", help="directory for train.parquet and val.parquet")
    p.add_argument("--train-seed-start", type=int, default=0)
    p.add_argument("--val-seed-start", type=int, default=DEFAULT_VAL_SEED_START)
    p.add_argument("--game-config", default="{}",
                   help="JSON merged into the bridge's default game config; with several "
                   "games, keyed by game name")
    p.add_argument("--system-prompt", default="default",
                   help="system message: 'default' (the game's), 'none', or the text")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    games = [g.strip() for g in args.game.split(",") if g.strip()]
    overrides = json.loads(args.game_config)
    for g in games:
        get_game(g).config(overrides_for(g, overrides))  # bad names/configs fail before any work
    system_prompt = None if args.system_prompt.lower() == "none" else args.system_prompt
    if args.train < 0 or args.val < 0:
        raise SystemExit("--train and --val must be >= 0")
    train_range = range(args.train_seed_start, args.train_seed_start + args.train)
    out = Path(args.out)
    train_rows: list[dict] = []
    val_rows: list[dict] = []
    for g in games:
        game_overrides = overrides_for(g, overrides)
        vs = val_seeds(g, args.val, args.val_seed_start, game_overrides)
        clash = [s for s in vs if s in train_range]
        if clash:
            raise SystemExit(f"{g}: validation seeds {clash[:5]}... overlap the training seeds "
                             f"[{train_range.start}, {train_range.stop}); move --val-seed-start")
        train_rows += build_rows(g, train_range, "train", game_overrides, system_prompt,
                                 index_start=len(train_rows))
        val_rows += build_rows(g, vs, "val", game_overrides, system_prompt,
                               index_start=len(val_rows))
    for name, rows in (("train", train_rows), ("val", val_rows)):
        path = write_parquet(rows, out / f"{name}.parquet")
        prompts = Counter(r["prompt"][-1]["content"] for r in rows)
        sources = Counter(r["data_source"] for r in rows)
        print(f"{path}: {len(rows)} rows, {len(prompts)} distinct prompts, "
              f"{dict(sources)}", file=sys.stderr)
    if val_rows:
        first = ", ".join(f"{r['extra_info']['game']}#{r['extra_info']['seed']}="
                          f"{r['extra_info']['answer'][:12]!r}" for r in val_rows[:3])
        print(f"first validation rows: {first}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
