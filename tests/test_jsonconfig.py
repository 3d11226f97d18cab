"""gamerl.config.jsonconfig and gamerl.config.configure: the committed config/*.json (the
Password Game, preset tiny) load into the intended TrainConfig, the written file's sections and
keys are TrainConfig's own, unknown keys and bad values are errors naming file, section and key,
config_to_json is the exact inverse of load_run_config, a file in the old shape loads as its
rewrite with a one-line notice, http execution returns the URL, the wizard (scripted answers, a
bad game name re-asked) writes files that load, and ``--defaults`` reproduces the committed files
byte for byte. No model is loaded."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

import pytest

from gamerl.config import get_config
from gamerl.config.train_config import SETTING_SECTION, setting_fields
from gamerl.config.configure import WizardCancelled, configure_main, default_config, run_wizard
from gamerl.games.openspiel import default_curriculum_stages
from gamerl.config.jsonconfig import (FILE_SECTIONS, NOT_IN_TRAIN_FILE, TOP_LEVEL, config_to_json,
                                      dumps, load_run_config, write_run_config)

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "config" / "train_config.json"
ENV = ROOT / "config" / "env_config.json"
# the committed OpenSpiel files of the old shape (model, lora, ppo, generation, training, ...)
LEGACY_TRAIN = ROOT / "tests" / "data" / "legacy_config" / "train_config.json"


def _write(tmp_path: Path, train: dict, env: dict | None = None) -> Path:
    (tmp_path / "train_config.json").write_text(json.dumps(train))
    if env is not None:
        (tmp_path / "env_config.json").write_text(json.dumps(env))
    return tmp_path / "train_config.json"


def _committed() -> tuple[dict, dict]:
    return json.loads(TRAIN.read_text()), json.loads(ENV.read_text())


def _openspiel() -> tuple[dict, dict]:
    """The wizard's OpenSpiel files (``configure --task openspiel --defaults``)."""
    return config_to_json(default_config("tiny", "openspiel"))


# ----------------------------------------------------------------------------- the committed files

def test_committed_files_load():
    cfg, url = load_run_config(TRAIN)  # env_config.json next to it is found
    assert url is None
    assert cfg.task == "password_game" and cfg.model == "tiny" and cfg.preset == "tiny"
    assert not cfg.lora and cfg.curriculum is None and cfg.replay_fraction == 0.0
    assert cfg == default_config() == get_config("tiny")


def test_every_setting_is_in_one_place():
    written = [k for keys in FILE_SECTIONS.values() for k in keys] + list(TOP_LEVEL)
    assert len(written) == len(set(written))
    assert set(written) | set(NOT_IN_TRAIN_FILE) == set(setting_fields())
    assert not set(written) & set(NOT_IN_TRAIN_FILE)


@pytest.mark.parametrize("task", ("password_game", "wordle", "openspiel"))
def test_written_sections_and_keys_are_trainconfigs(task):
    """Each section of the written file is a TrainConfig section, each key one of its settings
    under its own name (SETTING_SECTION), and every setting the file holds is there."""
    train, _ = config_to_json(default_config("tiny", task))
    assert list(train) == ["_comment", "preset", *FILE_SECTIONS]
    written = {key: section for section in FILE_SECTIONS for key in train[section]
               if key != "_comment"}
    assert all(SETTING_SECTION[key] == section for key, section in written.items())
    assert set(written) == set(SETTING_SECTION) - set(NOT_IN_TRAIN_FILE) - set(TOP_LEVEL)


def test_sections_and_comments():
    train, env = _committed()
    assert all("_comment" in train[s] for s in FILE_SECTIONS)
    assert "Qwen/Qwen3-0.6B" in " ".join(train["network"]["_comment"])
    assert "load_in_4bit" in " ".join(train["network"]["_comment"])
    assert env["task"] == "password_game" and env["execution"] == "local_password_game"


# ----------------------------------------------------------------------------- errors

def test_unknown_key_names_file_section_key_and_known_keys(tmp_path):
    train, env = _committed()
    train["optim"]["learnig_rate"] = 1e-3
    path = _write(tmp_path, train, env)
    with pytest.raises(ValueError) as e:
        load_run_config(path)
    msg = str(e.value)
    assert str(path) in msg and "optim" in msg and "'learnig_rate'" in msg
    assert "lr" in msg and "minibatch_size" in msg  # the known keys


def test_unknown_section_and_env_key(tmp_path):
    train, env = _openspiel()
    path = _write(tmp_path, {**train, "optimizer": {}}, env)
    with pytest.raises(ValueError, match=r"unknown key 'optimizer'.*known keys: preset, "
                                         r"network, adapters, game, sampling"):
        load_run_config(path)
    path = _write(tmp_path, train, {**env, "opponnent": "mcts"})
    with pytest.raises(ValueError, match=r"env_config\.json: unknown key 'opponnent'.*opponent"):
        load_run_config(path)
    path = _write(tmp_path, train, {**env, "reward": {"scale": 1.0, "bonus": 1}})
    with pytest.raises(ValueError, match=r"reward: unknown key 'bonus'"):
        load_run_config(path)


@pytest.mark.parametrize("shape,section", [("new", "sft"), ("old", "training")])
def test_a_removed_setting_is_dropped_when_off_and_refused_when_on(tmp_path, shape, section):
    """A file written before settings were removed (removed.REMOVED_SETTINGS) loads where
    they are off; one that turns one on is refused in one line naming the git tag to run it
    from."""
    path = TRAIN if shape == "new" else LEGACY_TRAIN
    train, env = json.loads(path.read_text()), json.loads((path.parent / "env_config.json")
                                                         .read_text())
    train[section].update(warmstart_kl_coef=0.0, warmstart_rft_rounds=0,
                          warmstart_rft_keep=0.5)  # keep: only with rounds on
    assert load_run_config(_write(tmp_path, train, env))[0] == load_run_config(path)[0]
    train[section]["warmstart_rft_rounds"] = 1
    with pytest.raises(ValueError, match=rf"{section} sets warmstart_rft_rounds=1, "
                                         r"warmstart_rft_keep=0\.5.*experiments-2026-12"):
        load_run_config(_write(tmp_path, train, env))


@pytest.mark.parametrize("section,key,value,match", [
    ("schedule", "epochs", "ten", r"schedule\.epochs: expected an integer"),
    ("adapters", "lora", "yes", r"adapters\.lora: expected true or false"),
    ("advantage", "advantage_estimator", "ppo", r"advantage\.advantage_estimator: expected one of"),
    ("output", "wandb_mode", "off", r"output\.wandb_mode"),
    ("schedule", "episodes_per_epoch", 1, r"episodes_per_epoch must be >= 2"),
    ("instances", "replay_fraction", 1.5, r"replay_fraction must be in \[0, 1\)"),
    ("instances", "curriculum", [{"name": "a", "games": ["chess"]}],
     r"instances\.curriculum:.*chess"),
    ("instances", "curriculum", "hard", r"instances\.curriculum: curriculum must be 'default'"),
])
def test_bad_values(tmp_path, section, key, value, match):
    train, env = _committed()
    train[section][key] = value
    with pytest.raises(ValueError, match=match):
        load_run_config(_write(tmp_path, train, env))


@pytest.mark.parametrize("key,value,match", [
    ("games", ["tic_tac_toe", "chess"], r"unknown game 'chess'; supported games: tic_tac_toe"),
    ("opponent", "alphazero", r"opponent: expected 'random' or 'mcts'"),
    ("model_seat", 2, r"model_seat"),
    ("execution", "remote", r"execution: expected one of local_openspiel, http"),
    ("illegal_move_policy", "skip", r"illegal_move_policy"),
])
def test_bad_env_values(tmp_path, key, value, match):
    train, env = _openspiel()
    env[key] = value
    with pytest.raises(ValueError, match=match):
        load_run_config(_write(tmp_path, train, env))


def test_invalid_json_names_the_file(tmp_path):
    path = tmp_path / "train_config.json"
    path.write_text('{"network": {"model": "tiny", // a comment\n}}')
    with pytest.raises(ValueError, match=r"train_config\.json: not valid JSON.*line 1"):
        load_run_config(path)


# ----------------------------------------------------------------------------- round trip

def test_round_trip_committed():
    cfg, _ = load_run_config(TRAIN)
    train, env = config_to_json(cfg)
    assert (train, env) == _committed()


def test_round_trip_changed_config(tmp_path):
    stages = [{"name": "one", "games": ["hex"], "opponent": "random", "threshold": 0.5},
              {"name": "two", "games": ["hex", "othello"], "opponent": "mcts", "threshold": 0.4}]
    cfg = get_config("qwen3-0.6b", task="openspiel").replace(
        model="Qwen/Qwen3-0.6B", lora=True, load_in_4bit=True, lora_rank=32, lora_alpha=64,
        lora_target_modules=["q_proj", "v_proj"], lr=2e-5, minibatch_size=2, clip_range=0.1,
        advantage_estimator="grpo", group_size=5, episodes_per_epoch=40, max_new_tokens=16,
        system_prompt="Play well.", curriculum=stages, curriculum_window=16,
        replay_fraction=0.0, replay_capacity=50, wandb_mode="disabled", out_dir="runs/x",
        dtype="bfloat16", eval_every=2, warmstart=False, warmstart_extra_prob=0.25,
        task_config={"games": ["hex", "othello"], "opponent": "mcts", "mcts_simulations": 20,
                     "model_seat": 1, "reward": {"scale": 2.0}})
    train_path, env_path = write_run_config(cfg, tmp_path / "cfg")
    back, url = load_run_config(train_path)  # base from the file's preset
    assert back == cfg and url is None
    train, _ = config_to_json(cfg)
    assert train["instances"]["curriculum"] == stages
    assert train["instances"]["replay_fraction"] == 0.0
    # a different base does not matter for the keys the file holds
    back2, _ = load_run_config(train_path, env_path, base=get_config("tiny", task="openspiel"))
    assert {k: v for k, v in back2.settings().items() if k not in NOT_IN_TRAIN_FILE} == {
        k: v for k, v in cfg.settings().items() if k not in NOT_IN_TRAIN_FILE}


def test_partial_file_and_overrides(tmp_path):
    path = _write(tmp_path, {"schedule": {"epochs": 2}, "adapters": {"lora": True}})
    cfg, url = load_run_config(path, overrides={"seed": 7})  # no env file: the Password Game
    assert cfg == get_config("tiny").replace(epochs=2, lora=True, seed=7) and url is None
    cfg, _ = load_run_config(path, base=get_config("tiny", task="openspiel"))  # or the base's
    assert cfg == get_config("tiny", task="openspiel").replace(epochs=2, lora=True)


def test_http_execution_returns_url(tmp_path):
    train, env = _openspiel()
    env.update(execution="http", base_url="http://127.0.0.1:8002")
    cfg, url = load_run_config(_write(tmp_path, train, env))
    assert url == "http://127.0.0.1:8002"
    assert "base_url" not in cfg.task_config and "execution" not in cfg.task_config
    assert config_to_json(cfg, url)[1] == env
    del env["base_url"]
    with pytest.raises(ValueError, match="needs a base_url"):
        load_run_config(_write(tmp_path, train, env))


# ----------------------------------------------------------------------------- the old shape

def test_an_old_shape_file_loads_as_its_rewrite_with_a_one_line_notice(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="gamerl"):
        old, url = load_run_config(LEGACY_TRAIN)
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "\n" not in notices[0], notices
    assert notices[0].startswith(f"{LEGACY_TRAIN} uses the old key names (model_name, use_4bit")
    assert "docs/reference.md" in notices[0] and "python -m gamerl configure" in notices[0]
    assert url is None and old == default_config("tiny", "openspiel")  # what wrote it
    caplog.clear()
    train_path, _ = write_run_config(old, tmp_path)
    with caplog.at_level(logging.INFO, logger="gamerl"):
        assert load_run_config(train_path) == (old, None)
    assert not caplog.records


def test_the_old_shapes_switches_and_defaults(tmp_path):
    """curriculum.enabled/stages and replay.enabled/fraction are one setting each; an old file
    without env_config.json is OpenSpiel's (the only game it was written for)."""
    path = _write(tmp_path, {"curriculum": {"enabled": False, "stages": None, "window": 32},
                             "replay": {"enabled": False, "fraction": 0.3},
                             "ppo": {"learning_rate": 0.001}})
    cfg, _ = load_run_config(path)
    assert cfg == get_config("tiny", task="openspiel").replace(curriculum_window=32, lr=1e-3)
    path = _write(tmp_path, {"curriculum": {"enabled": True}, "replay": {"fraction": 0.2}})
    cfg, _ = load_run_config(path)
    assert (cfg.curriculum, cfg.replay_fraction) == ("default", 0.2)


@pytest.mark.parametrize("section,key,value,match", [
    ("training", "epoch", 3, r"training: unknown key 'epoch'.*known keys: epochs"),
    ("training", "epochs", "ten", r"training\.epochs: expected an integer"),
    ("lora", "enabled", "yes", r"lora\.enabled: expected true or false"),
    ("curriculum", "enabled", "yes", r"curriculum\.enabled: expected true or false"),
    ("curriculum", "stages", [{"name": "a", "games": ["chess"]}], r"curriculum\.stages:.*chess"),
    ("replay", "fraction", 1.5, r"replay_fraction must be in \[0, 1\)"),
])
def test_an_old_shape_file_is_checked_as_strictly(tmp_path, section, key, value, match):
    train = json.loads(LEGACY_TRAIN.read_text())
    train[section][key] = value
    env = json.loads((LEGACY_TRAIN.parent / "env_config.json").read_text())
    with pytest.raises(ValueError, match=match):
        load_run_config(_write(tmp_path, train, env))


# ----------------------------------------------------------------------------- the wizard

class Script:
    """A fake ``input``: answers in order; records the prompts."""

    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise AssertionError(f"unexpected question: {prompt}")
        return self.answers.pop(0)


def test_wizard_scripted(tmp_path):
    said: list[str] = []
    ask = Script([
        "openspiel",                      # game [password_game]
        "",                               # model [tiny]
        "yes", "4",                       # LoRA, rank 4
        "tic_tac_toe, chess",             # a bad game: re-asked
        "connect_four,hex",               # games
        "mcts", "30",                     # opponent, simulations
        "no",                             # curriculum
        "maybe", "yes",                   # replay: a bad yes/no re-asked
        "3", "1", "8",                    # epochs; episodes 1 (< 2) re-asked, then 8
        "disabled",                       # wandb
        "runs/mine",                      # run directory
    ])
    train_path, env_path = run_wizard(ask=ask, say=said.append, out_dir=tmp_path / "c",
                                      cuda=False)
    assert not ask.answers
    assert any("chess" in s and "tic_tac_toe" in s for s in said)  # why it was re-asked
    assert any("no CUDA GPU" in s for s in said)
    assert any("--config" in s and str(train_path) in s for s in said)
    assert [p for p in ask.prompts if p.startswith("Games")].__len__() == 2
    assert ask.prompts[0].startswith("Game") and "[password_game]" in ask.prompts[0]
    assert ask.prompts[1].startswith("Model") and "[tiny]" in ask.prompts[1]
    cfg, url = load_run_config(train_path)
    assert url is None and env_path == train_path.parent / "env_config.json"
    assert cfg.task_config["games"] == ["connect_four", "hex"]
    assert cfg.task_config["opponent"] == "mcts" and cfg.task_config["mcts_simulations"] == 30
    assert cfg.lora and (cfg.lora_rank, cfg.lora_alpha) == (4, 8)
    assert cfg.curriculum is None and cfg.replay_fraction == 0.3
    assert (cfg.epochs, cfg.episodes_per_epoch) == (3, 8)
    assert cfg.wandb_mode == "disabled" and cfg.out_dir == "runs/mine"


def test_wizard_gpu_4bit_and_qwen(tmp_path):
    ask = Script(["openspiel", "Qwen/Qwen3-0.6B", "yes", "", "", "", "", "", "", "", "", ""])
    train_path, _ = run_wizard(ask=ask, say=lambda s: None, out_dir=tmp_path, cuda=True)
    cfg, _ = load_run_config(train_path)
    assert cfg.model == "Qwen/Qwen3-0.6B" and cfg.preset == "qwen3-0.6b"
    assert cfg.load_in_4bit and cfg.lora and cfg.lora_rank == 16 and not cfg.warmstart
    assert not any(p.startswith("Train LoRA") for p in ask.prompts)  # 4-bit forces LoRA


def test_wizard_confirms_overwrite(tmp_path):
    shutil.copy(TRAIN, tmp_path / "train_config.json")
    (tmp_path / "env_config.json").write_text("{}\n")
    # decline, then no other directory: nothing written
    ask = Script([""] * 11 + ["no", ""])
    with pytest.raises(WizardCancelled):
        run_wizard(ask=ask, say=lambda s: None, out_dir=tmp_path, cuda=False)
    assert "Overwrite?" in ask.prompts[-2] and "env_config.json" in ask.prompts[-2]
    assert (tmp_path / "env_config.json").read_text() == "{}\n"
    # decline, write elsewhere
    ask = Script([""] * 11 + ["n", str(tmp_path / "other")])
    train_path, _ = run_wizard(ask=ask, say=lambda s: None, out_dir=tmp_path, cuda=False)
    assert train_path == tmp_path / "other" / "train_config.json"
    # accept
    ask = Script([""] * 11 + ["y"])
    run_wizard(ask=ask, say=lambda s: None, out_dir=tmp_path, cuda=False)
    assert (tmp_path / "env_config.json").read_text() == ENV.read_text()


def test_defaults_match_committed_files(tmp_path, capsys, monkeypatch):
    import gamerl.config.configure

    # no torch import
    monkeypatch.setattr(gamerl.config.configure, "_cuda_available", lambda: False)
    assert configure_main(["--out", str(tmp_path), "--defaults"]) == 0
    assert (tmp_path / "train_config.json").read_text() == TRAIN.read_text()
    assert (tmp_path / "env_config.json").read_text() == ENV.read_text()
    assert "python -m gamerl train --task password_game --config" in capsys.readouterr().out
    # --defaults never overwrites other content without --force
    (tmp_path / "env_config.json").write_text("{}\n")
    assert configure_main(["--out", str(tmp_path), "--defaults"]) == 1
    assert (tmp_path / "env_config.json").read_text() == "{}\n"
    args = gamerl.config.configure.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--out", str(tmp_path), "--defaults", "--force"])  # what cli.py's subcommand passes
    assert configure_main(args) == 0
    assert (tmp_path / "env_config.json").read_text() == ENV.read_text()
    assert dumps(config_to_json(default_config())[0]) == TRAIN.read_text()


# ----------------------------------------------------------------------------- every game

GAMES = ("password_game", "wordle", "openspiel")


@pytest.mark.parametrize("task", GAMES)
def test_defaults_of_every_game_round_trip(tmp_path, task):
    cfg = default_config("tiny", task)
    assert cfg.task == task
    train_path, env_path = write_run_config(cfg, tmp_path)
    env = json.loads(env_path.read_text())
    assert env["task"] == task and env["execution"] == f"local_{task}"
    assert load_run_config(train_path) == (cfg, None)
    # and over HTTP
    url = "http://127.0.0.1:9000"
    train_path, env_path = write_run_config(cfg, tmp_path / "http", url)
    assert load_run_config(train_path) == (cfg, url)


def test_password_game_env_holds_its_rules_and_reward(tmp_path):
    cfg = default_config("tiny", "password_game").replace(num_rules=9, length_penalty=0.02,
                                                          reward_mode="absolute")
    _, env = config_to_json(cfg)
    assert env["num_rules"] == 9
    assert env["reward"] == {"reward_per_rule": 1.0, "length_penalty": 0.02,
                             "episode_bonus": 10.0, "bonus_min_rules": 5, "mode": "absolute"}
    train, _ = config_to_json(cfg)
    assert "--task password_game" in " ".join(train["_comment"])
    assert "OpenSpiel" not in " ".join(train["sampling"]["_comment"])


@pytest.mark.parametrize("task,key,value,match", [
    ("password_game", "num_rules", "six", r"num_rules: expected an integer"),
    ("password_game", "reward", {"per_rule": 1},
     r"reward: unknown key 'per_rule'.*reward_per_rule"),
    ("password_game", "games", ["hex"], r"unknown key 'games'.*num_rules"),
    ("wordle", "max_guesses", 0, r"max_guesses must be an int in \[1, 100\]"),
    ("wordle", "reward", {"win_reward": -1}, r"reward.win_reward must be >= 0"),
    ("wordle", "execution", "local_openspiel", r"execution: expected one of local_wordle, http"),
    ("openspiel", "task", "chess", r"task: expected one of password_game, wordle, openspiel"),
])
def test_bad_env_values_of_every_game(tmp_path, task, key, value, match):
    train, env = config_to_json(default_config("tiny", task))
    env[key] = value
    with pytest.raises(ValueError, match=match):
        load_run_config(_write(tmp_path, train, env))


def test_env_without_task_is_openspiel_and_preset_follows_the_env_task(tmp_path):
    train, env = _openspiel()
    del env["task"]  # a file written before every game could be configured
    assert load_run_config(_write(tmp_path, train, env))[0] == default_config("tiny", "openspiel")
    # `train --preset tiny --config ...` builds the Password Game's base; a Wordle env file makes
    # it the tiny preset of Wordle (keys the file leaves out come from there)
    _, env = config_to_json(default_config("tiny", "wordle"))
    path = _write(tmp_path, {"schedule": {"epochs": 2}}, env)
    cfg, _ = load_run_config(path, base=get_config("tiny"))
    assert cfg == get_config("tiny", task="wordle").replace(epochs=2,
                                                           task_config=env_task_config(env))


def env_task_config(env: dict) -> dict:
    return {k: v for k, v in env.items() if k not in ("_comment", "task", "execution")}


def test_wizard_password_game(tmp_path):
    said: list[str] = []
    ask = Script([
        "password_game",                  # game
        "",                               # model [tiny]
        "",                               # LoRA [no]: the preset trains every weight
        "30", "5",                        # rules: 30 (> 26) re-asked, then 5
        "4",                              # turns per game
        "absolute",                       # reward mode
        "",                               # replay [no]
        "2", "",                          # epochs, episodes per epoch [32]
        "disabled", "",                   # wandb, run directory [auto]
    ])
    train_path, _ = run_wizard(ask=ask, say=said.append, out_dir=tmp_path, cuda=False)
    assert not ask.answers
    assert any("num_rules must be in 1..26" in s for s in said)
    assert any("--task password_game --config" in s for s in said)
    cfg, _ = load_run_config(train_path)
    assert cfg == default_config("tiny", "password_game").replace(
        num_rules=5, max_steps=4, reward_mode="absolute", epochs=2, wandb_mode="disabled")


def test_wizard_wordle(tmp_path):
    ask = Script(["wordle", "", "yes", "4", "7", "yes", "yes", "", "", "", ""])
    train_path, _ = run_wizard(ask=ask, say=lambda s: None, out_dir=tmp_path, cuda=False)
    assert not ask.answers
    cfg, _ = load_run_config(train_path)
    assert cfg.task == "wordle" and cfg.lora and cfg.lora_rank == 4
    assert cfg.task_config["max_guesses"] == 7 and cfg.task_config["hard_mode"] is True
    assert cfg.replay_fraction == 0.3


@pytest.mark.parametrize("task", GAMES)
def test_defaults_for_a_game_with_task_flag(tmp_path, capsys, monkeypatch, task):
    import gamerl.config.configure

    monkeypatch.setattr(gamerl.config.configure, "_cuda_available", lambda: False)
    assert configure_main(["--out", str(tmp_path), "--defaults", "--task", task]) == 0
    assert f"python -m gamerl train --task {task} --config" in capsys.readouterr().out
    assert load_run_config(tmp_path / "train_config.json")[0] == default_config("tiny", task)


@pytest.mark.slow
@pytest.mark.parametrize("task", GAMES)
def test_configured_files_train_every_game(tmp_path, tiny_dir, monkeypatch, task):
    """What `configure` writes, `train --config` runs (one short epoch, no warm start)."""
    import gamerl.config.configure
    from conftest import run_gamerl

    monkeypatch.setattr(gamerl.config.configure, "_cuda_available", lambda: False)
    assert configure_main(["--out", str(tmp_path / "cfg"), "--defaults", "--task", task]) == 0
    res = run_gamerl("train", "--config", str(tmp_path / "cfg" / "train_config.json"),
                     "--out", str(tmp_path / "run"), "--epochs", "1", "--episodes-per-epoch",
                     "2", "--eval-episodes", "2", "--wandb-mode", "disabled", "--no-progress",
                     "--set", "warmstart=false", "--set", "max_new_tokens=4",
                     "--set", "minibatch_size=2", "--set", "ppo_epochs=1")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["config"]["task"] == task and summary["epochs"] == 1
