"""The warm start's cache (gamerl.core.warmstart.cached_warm_start): keyed on every setting the
warm start read (``SettingsRead``), so a setting that changes its data misses the cache and one
it never reads keeps it; a warm start made before settings were removed (with them off) is still
the one these settings make. Every test runs the embedded tiny model for a few seconds."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json

import pytest

import gamerl.core.warmstart as ws
from gamerl.config import get_config
from gamerl.config.removed import REMOVED_SETTINGS
from gamerl.models import load_policy


def ws_cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                warmstart=True, warmstart_steps=4, warmstart_examples=8,
                warmstart_batch_size=2, warmstart_checkpoint_seconds=0,
                wandb_mode="disabled", progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


# (setting, another value): each changes what the warm start trains on: how later turns render
# (feedback, the context budget), the games' rewards and the run's sampling settings
CHANGES_THE_DATA = [("feedback", "full"), ("max_context_tokens", 300), ("reward_per_rule", 2.0),
                    ("length_penalty", 0.05), ("episode_bonus", 3.0), ("bonus_min_rules", 2),
                    ("reward_mode", "absolute"), ("top_p", 0.9)]


@pytest.fixture(scope="module")
def made(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ws_key") / "warmstart"
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    ws.warm_start(lm, tok, ws_cfg(tiny_dir), out)
    return out


@pytest.mark.parametrize("name,value", CHANGES_THE_DATA)
def test_a_setting_the_warm_start_read_misses_its_cache(tiny_dir, made, name, value):
    """The cache is keyed on every setting the warm start read (derived from what ran, not a
    list kept by hand): before, feedback and the context budget counted only with RFT rounds
    on, and the reward settings never, so a changed setting reused a stale warm start."""
    assert ws.cached_warm_start(ws_cfg(tiny_dir), made) is not None
    assert getattr(ws_cfg(tiny_dir), name) != value
    assert ws.cached_warm_start(ws_cfg(tiny_dir, **{name: value}), made) is None


def test_settings_the_warm_start_never_read_keep_its_cache(tiny_dir, made):
    """PPO's own settings (more epochs on resume, another learning rate) and how the run is
    shown keep the warm start."""
    cfg = ws_cfg(tiny_dir, epochs=99, lr=1e-3, clip_range=0.3, progress=True,
                 warmstart_checkpoint_seconds=60)
    assert ws.cached_warm_start(cfg, made) is not None


def test_a_warm_start_made_with_removed_settings_off_is_reused(tiny_dir, made):
    """A marker written before the removal names the removed settings the warm start read, at
    their values then: off, it is the same warm start; on, it is not this one."""
    settings = json.loads((made / ws.MARKER).read_text())["settings"]
    cfg = ws_cfg(tiny_dir)
    assert ws._same_settings(settings, cfg)
    assert ws._same_settings({**settings, **REMOVED_SETTINGS}, cfg)  # every one read, each off
    assert not ws._same_settings({**settings, **REMOVED_SETTINGS, "warmstart_kl_coef": 0.5}, cfg)
    assert not ws._same_settings({**settings, "no_such_setting": 1}, cfg)
