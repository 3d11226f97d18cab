"""PPO with LoRA through the Trainer and the CLI: adapters-only checkpoints, the reference as the
base model with adapters off, resume, evaluate and merge of a LoRA run (tiny model, CPU)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from gamerl.config import get_config
from gamerl.models.lora import is_peft
from gamerl.core.epoch import collect, epoch_seeds
from gamerl.core.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]


def lora_cfg(**kw):
    base = dict(lora=True, lora_rank=4, lora_alpha=8, epochs=2,
                episodes_per_epoch=4, eval_episodes=4, num_rules=4, max_steps=2,
                max_new_tokens=12, warmstart_steps=5, warmstart_examples=16, minibatch_size=2,
                ppo_epochs=1, wandb_mode="disabled", progress=False)
    return get_config("tiny", **{**base, **kw})


@pytest.fixture(scope="module")
def lora_run(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora") / "run"
    trainer = Trainer(lora_cfg(), out)
    summary = trainer.train()
    return out, trainer, summary


@pytest.mark.slow
def test_lora_run_trains_adapters_only_and_saves_only_them(lora_run):
    out, trainer, summary = lora_run
    assert is_peft(trainer.policy.lm) and trainer.reference is trainer.policy.lm
    trainable = {n for n, p in trainer.policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("value_head") for n in trainable)
    last = out / "last"
    assert (last / "adapter_config.json").exists() and (last / "adapter_model.safetensors").exists()
    assert not (last / "model.safetensors").exists()  # no base weights in a LoRA checkpoint
    assert summary["epochs"] == 2 and summary["final"]["episodes"] == 4


@pytest.mark.slow
def test_lora_first_ratio_is_one_and_reference_is_the_base(lora_run):
    """With lora_dropout 0 the old log-probs (policy) and the reference (adapters off) agree
    with a fresh forward: the adapters start at zero (B = 0), so before any update
    policy == reference exactly."""
    _, trainer, _ = lora_run
    fresh = Trainer(lora_cfg(epochs=0), trainer.run_dir.parent / "fresh")
    batch = collect(fresh.policy, fresh.reference, fresh.tokenizer, epoch_seeds(fresh.cfg, 0),
                    fresh.make_env, fresh.cfg)
    m = batch.mask.bool()
    assert torch.allclose(batch.old_logprobs[m], batch.ref_logprobs[m], atol=1e-5)
    # and on the trained run the adapters moved the policy away from its reference
    batch = collect(trainer.policy, trainer.reference, trainer.tokenizer,
                    epoch_seeds(trainer.cfg, 0), trainer.make_env, trainer.cfg)
    m = batch.mask.bool()
    assert not torch.allclose(batch.old_logprobs[m], batch.ref_logprobs[m], atol=1e-4)


@pytest.mark.slow
def test_lora_resume_continues(lora_run):
    out, trainer, _ = lora_run
    resumed = Trainer(trainer.cfg.replace(epochs=3), out, resume=True)
    assert resumed.state.epoch == 2 and is_peft(resumed.policy.lm)
    # the adapters were restored, not re-initialised: same log-probs as the saved policy
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        a = trainer.policy.lm(input_ids=ids).logits
        b = resumed.policy.lm(input_ids=ids).logits
    # trainer trained 2 epochs and saved last/ at epoch 2: its in-memory policy is that one
    assert torch.allclose(a, b, atol=1e-5)
    summary = resumed.train()
    assert summary["epochs"] == 3


@pytest.mark.slow
def test_cli_evaluate_and_merge_a_lora_checkpoint(lora_run, tiny_dir, tmp_path):
    out, trainer, _ = lora_run
    env = {**os.environ, "GAMERL_TINY_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "WANDB_SILENT": "true"}
    res = subprocess.run([sys.executable, "-m", "gamerl", "evaluate", "--checkpoint",
                          str(out / "best"), "--episodes", "4"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "policy" in res.stdout and "solver" in res.stdout
    merged = tmp_path / "merged"
    res = subprocess.run([sys.executable, "-m", "gamerl", "merge", "--base",
                          str(out / "warmstart"), "--adapters", str(out / "best"), "--output",
                          str(merged)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    from gamerl.models.lora import load_lora_policy

    policy, _ = load_lora_policy(str(out / "warmstart"), out / "best", trainable=False)
    standalone = AutoModelForCausalLM.from_pretrained(merged)
    ids = torch.tensor([[5, 17, 42, 99, 3, 8, 250]])
    with torch.no_grad():
        assert torch.allclose(policy.lm(input_ids=ids).logits, standalone(input_ids=ids).logits,
                              atol=1e-4)


@pytest.mark.slow
def test_lora_resume_refuses_damaged_adapters(lora_run, tmp_path):
    """A LoRA checkpoint is adapters + value head + optimizer: the manifest covers them too
    (before: bytes overwritten in the adapters resumed without a word)."""
    import shutil

    out, trainer, _ = lora_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".gamerl.lock"))
    adapters = copy / "last" / "adapter_model.safetensors"
    with open(adapters, "r+b") as f:
        f.seek(adapters.stat().st_size // 2)
        f.write(bytes(1024))
    with pytest.raises(RuntimeError, match="adapter_model.safetensors"):
        Trainer(trainer.cfg.replace(epochs=3), copy, resume=True)


@pytest.mark.slow
def test_lora_resume_loads_the_base_as_the_run_did(tiny_dir, tmp_path):
    """A resumed LoRA run loads its base with the run's own gradient_checkpointing and
    attn_implementation (before: load_lora_policy dropped both, and a QLoRA run's 4-bit), so
    the resumed policy is the one that saved, setting for setting."""
    from gamerl.models import unwrap_lm

    cfg = lora_cfg(epochs=1, gradient_checkpointing=True, attn_implementation="eager")
    first = Trainer(cfg, tmp_path / "run")
    first.train()
    resumed = Trainer(cfg.replace(epochs=2), tmp_path / "run", resume=True)
    try:
        for trainer in (first, resumed):
            lm = unwrap_lm(trainer.policy.lm)
            assert lm.is_gradient_checkpointing, "gradient checkpointing is off"
            assert lm.config._attn_implementation == "eager"
    finally:
        resumed.close()


def test_lora_policy_loads_a_4bit_base_when_the_run_did(tiny_dir, tmp_path, monkeypatch):
    """load_in_4bit reaches the loader on resume too (4-bit itself needs CUDA: recorded here)."""
    from gamerl.models import PolicyWithValue, load_policy, lora

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    PolicyWithValue(lora.apply_lora(lm, lora.LoraSettings(rank=2))).save(tmp_path / "ckpt", tok)
    calls = []

    def fake_4bit(name, **kw):
        calls.append(kw)
        return load_policy(name, device="cpu")

    monkeypatch.setattr(lora, "load_4bit", fake_4bit)
    lora.load_lora_policy(str(tiny_dir), tmp_path / "ckpt", load_in_4bit=True,
                          gradient_checkpointing=True, attn_implementation="eager")
    assert calls == [{"gradient_checkpointing": True, "attn_implementation": "eager"}]
