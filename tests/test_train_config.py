"""TrainConfig is grouped by concern: small sections, each setting in exactly one, reachable by
its flat name (the name presets, --set, JSON and config.json use) and through its section."""

import json

import pytest

from gamerl.config import TrainConfig, coerce_override, get_config
from gamerl.config.removed import REMOVED_SETTINGS, REMOVED_TAG
from gamerl.config.train_config import SECTIONS, SETTING_SECTION, OptimSettings, setting_fields
from gamerl.games.password_game import PasswordGameSettings


def test_sections_are_small_and_every_setting_is_in_one():
    sizes = {name: len(cls.__dataclass_fields__) for name, cls in SECTIONS.items()}
    assert max(sizes.values()) <= 10, sizes  # a section reads like nanoGPT's GPTConfig
    assert sum(sizes.values()) == len(SETTING_SECTION) == len(setting_fields())
    assert SETTING_SECTION["lr"] == "optim" and SETTING_SECTION["num_rules"] == "password_game"
    # the Password Game's settings are the game's own dataclass, defined with the game
    assert SECTIONS["password_game"] is PasswordGameSettings
    assert PasswordGameSettings.__module__ == "gamerl.games.password_game"


def test_a_flat_name_reads_and_writes_its_section():
    cfg = get_config("tiny", lr=3e-4, num_rules=12)
    assert cfg.lr == cfg.optim.lr == 3e-4
    assert cfg.num_rules == cfg.password_game.num_rules == 12
    cfg.kl_coef = 0.5
    assert cfg.kl.kl_coef == 0.5
    cfg.ppo.clip_range = 0.3
    assert cfg.clip_range == 0.3


def test_built_from_flat_names_or_sections_alike():
    flat = TrainConfig(lr=1e-4, minibatch_size=8, task="wordle")
    by_section = TrainConfig(optim=OptimSettings(lr=1e-4, minibatch_size=8), task="wordle")
    assert flat == by_section
    assert TrainConfig(**flat.settings()) == flat
    with pytest.raises(ValueError, match="did you mean 'lr'"):
        TrainConfig(learning_rate=1e-4)


def test_replace_copies_and_checks():
    cfg = get_config("tiny")
    other = cfg.replace(task_config={"max_guesses": 5}, task="wordle")
    other.task_config["max_guesses"] = 4  # sections are not shared between configs
    assert cfg.task_config == {} and cfg.task == "password_game"
    with pytest.raises(ValueError, match="num_rules"):
        cfg.replace(num_rules=0)
    with pytest.raises(ValueError, match="unknown setting 'cliprange'; did you mean 'clip_range'"):
        cfg.replace(cliprange=0.1)
    assert coerce_override("lr", "2e-4") == 2e-4 and coerce_override("lora", "on") is True


def test_config_json_keeps_flat_names_and_old_files_load(tmp_path):
    cfg = get_config("smollm2-135m", seed=3)
    path = tmp_path / "config.json"
    cfg.save(path)
    saved = json.loads(path.read_text())
    assert saved["lr"] == cfg.lr and "optim" not in saved and "progress" not in saved
    assert TrainConfig.load(path) == cfg
    # a config.json from before the sections (flat, with a setting this version dropped)
    old = {**saved, "some_removed_setting": 1}
    old.pop("val_seed_start")  # added later: the default fills it in
    path.write_text(json.dumps(old))
    loaded = TrainConfig.load(path)
    assert loaded.val_seed_start == 2_000_000 and loaded.replace(seed=3) == cfg
    # a file written by section loads too
    path.write_text(json.dumps({"optim": {"lr": 7e-5}, "password_game": {"num_rules": 9}}))
    assert (TrainConfig.load(path).lr, TrainConfig.load(path).num_rules) == (7e-5, 9)


def test_a_run_that_turned_on_a_removed_setting_evaluates_but_does_not_resume(tmp_path):
    """Settings removed on 2026-12-07 (REMOVED_SETTINGS): a config.json that kept them off
    loads and resumes; one that turned one on still loads (its checkpoints evaluate), but its
    resume is refused in one line naming the git tag that still runs it."""
    cfg = get_config("tiny")
    path = tmp_path / "config.json"
    old = {**cfg.to_dict(), **REMOVED_SETTINGS}  # every removed setting, each off
    path.write_text(json.dumps(old))
    assert TrainConfig.load(path, resuming=True) == cfg
    # one that mattered only while another was on: not in use while that one is off
    path.write_text(json.dumps({**old, "warmstart_rft_keep": 0.5}))
    assert TrainConfig.load(path, resuming=True) == cfg
    path.write_text(json.dumps({**old, "warmstart_rft_rounds": 2, "warmstart_rft_keep": 0.5}))
    assert TrainConfig.load(path) == cfg
    with pytest.raises(ValueError) as refused:
        TrainConfig.load(path, resuming=True)
    message = str(refused.value)
    assert "\n" not in message and REMOVED_TAG in message
    assert "warmstart_rft_rounds=2, warmstart_rft_keep=0.5" in message


@pytest.mark.parametrize("moved", [dict(val_seed_start=1_000_010),  # validation into test
                                   dict(val_seed_start=50),  # validation into training
                                   dict(eval_seed_start=99_990)])  # test into training
def test_overlapping_seed_ranges_are_refused(moved):
    """Training, validation and test games never share a seed: the validation games choose
    best/, the test games are reported, and neither may be trained on."""
    with pytest.raises(ValueError, match="overlap"):
        get_config("tiny", **moved)
    ranges = get_config("tiny").seed_ranges()
    assert set(ranges) == {"train", "validation", "test"}
