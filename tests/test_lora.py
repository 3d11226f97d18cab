"""gamerl.models.lora: adapters only train, save/load/merge round trips, the adapters-off reference,
PolicyWithValue on a PeftModel, and the 4-bit error on machines without CUDA.

All on the embedded tiny model (fp32, CPU); offline mode is forced before transformers loads.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from gamerl.models.lora import (ADAPTER_CONFIG, ADAPTER_WEIGHTS, QWEN3_TARGET_MODULES, LoraSettings,
                         adapter_disabled, apply_lora, load_4bit, load_adapters, load_lora_policy,
                         merge_adapters, quantization_config, save_adapters, trainable_parameters)
from gamerl.models import VALUE_HEAD_FILE, PolicyWithValue, ensure_tiny, load_policy


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return ensure_tiny(tmp_path_factory.mktemp("lora") / "tiny")


def _base(tiny_dir):
    lm, tok = load_policy(str(tiny_dir), device="cpu", dtype=torch.float32)
    return lm, tok


def _ids(seed: int = 0, batch: int = 2, length: int = 12) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(5, 1000, (batch, length), generator=g)


def _logits(model, ids) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


def _train(model, steps: int = 4, lr: float = 1e-2) -> None:
    """A few AdamW steps of next-token loss on random tokens: moves the adapters off zero."""
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    for step in range(steps):
        ids = _ids(seed=100 + step, batch=4, length=16)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.fixture(scope="module")
def trained(tiny_dir, tmp_path_factory):
    """A LoRA model after a few optimizer steps, and its saved adapter directory."""
    torch.manual_seed(0)
    lm, _ = _base(tiny_dir)
    model = apply_lora(lm, LoraSettings(rank=8, alpha=16, dropout=0.0))
    _train(model)
    out = save_adapters(model, tmp_path_factory.mktemp("adapters") / "adapters")
    return model, out


# ----------------------------------------------------------------------------- applying


def test_default_targets_are_qwen3_projections(tiny_dir):
    from transformers.models.qwen3 import modeling_qwen3

    lm, _ = _base(tiny_dir)
    layer = lm.model.layers[0]
    for name in QWEN3_TARGET_MODULES:  # every default target is a Linear of a Qwen3 layer
        owner = layer.self_attn if name in ("q_proj", "k_proj", "v_proj", "o_proj") else layer.mlp
        assert isinstance(getattr(owner, name), torch.nn.Linear), name
    assert isinstance(layer.self_attn, modeling_qwen3.Qwen3Attention)
    assert LoraSettings().target_modules == list(QWEN3_TARGET_MODULES)
    with pytest.raises(ValueError, match="qproj"):  # a typo is an error, not a silent skip
        apply_lora(lm, LoraSettings(target_modules=["qproj", "v_proj"]))


def test_only_adapters_train(tiny_dir, caplog):
    lm, _ = _base(tiny_dir)
    # What LoRA adds: rank * (in + out) per adapted Linear layer.
    expected = sum(8 * (m.in_features + m.out_features) for n, m in lm.named_modules()
                   if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in QWEN3_TARGET_MODULES)
    total_before = trainable_parameters(lm)[1]
    with caplog.at_level("INFO", logger="gamerl"):
        model = apply_lora(lm, LoraSettings(rank=8))
    trainable, total = trainable_parameters(model)
    assert trainable == expected and total == total_before + expected
    assert f"{trainable:,} trainable" in caplog.text
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    # Fresh adapters leave the model unchanged (B starts at zero).
    base, _ = _base(tiny_dir)
    ids = _ids()
    torch.testing.assert_close(_logits(model, ids), _logits(base, ids), rtol=0, atol=0)
    with pytest.raises(ValueError, match="already has adapters"):
        apply_lora(model)


def test_settings_from_dict():
    s = LoraSettings.from_dict({"rank": 4, "alpha": 8, "target_modules": None})
    assert (s.rank, s.alpha, s.dropout, s.target_modules) == (4, 8, 0.0, list(QWEN3_TARGET_MODULES))
    assert LoraSettings.from_dict(s.to_dict()) == s


# ----------------------------------------------------------------------------- save / load / merge


def test_saved_adapters_are_small_and_reload_exactly(tiny_dir, trained):
    model, out = trained
    ids = _ids(seed=1)
    base, _ = _base(tiny_dir)
    assert not torch.allclose(_logits(model, ids), _logits(base, ids))  # training moved it

    files = sorted(p.name for p in out.iterdir())
    assert ADAPTER_CONFIG in files and ADAPTER_WEIGHTS in files
    assert "model.safetensors" not in files and "config.json" not in files
    with safe_open(str(out / ADAPTER_WEIGHTS), "pt") as f:
        keys = list(f.keys())
    assert keys and all("lora_" in k for k in keys)  # no base weight, no embedding
    adapter_bytes = (out / ADAPTER_WEIGHTS).stat().st_size
    assert adapter_bytes < 0.25 * (tiny_dir / "model.safetensors").stat().st_size
    assert json.loads((out / ADAPTER_CONFIG).read_text())["r"] == 8

    fresh, _ = _base(tiny_dir)
    reloaded = load_adapters(fresh, out, trainable=True)
    torch.testing.assert_close(_logits(reloaded, ids), _logits(model, ids), rtol=0, atol=0)
    assert trainable_parameters(reloaded)[0] == trainable_parameters(model)[0]
    frozen = load_adapters(_base(tiny_dir)[0], out, trainable=False)
    assert trainable_parameters(frozen)[0] == 0
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_adapters(_base(tiny_dir)[0], tiny_dir)


def test_merge_round_trip(tiny_dir, trained, tmp_path):
    model, adapters = trained
    merged_dir = merge_adapters(str(tiny_dir), adapters, tmp_path / "merged")
    assert (merged_dir / "config.json").exists() and (merged_dir / "tokenizer.json").exists()
    assert not (merged_dir / ADAPTER_CONFIG).exists()
    merged = AutoModelForCausalLM.from_pretrained(merged_dir)  # plain transformers, no peft
    assert merged.dtype == torch.float32  # the base checkpoint's dtype
    ids = _ids(seed=2)
    torch.testing.assert_close(_logits(merged, ids), _logits(model, ids), rtol=0, atol=1e-5)
    # The merge leaves no stray temporary directory next to the output.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged"]


def test_merge_by_name_tiny(tiny_dir, trained, tmp_path, monkeypatch):
    monkeypatch.setenv("GAMERL_TINY_DIR", str(tiny_dir))
    model, adapters = trained
    out = merge_adapters("tiny", adapters, tmp_path / "m")
    merged, _ = load_policy(str(out), device="cpu")
    ids = _ids(seed=3)
    torch.testing.assert_close(_logits(merged, ids), _logits(model, ids), rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- the reference


def test_adapter_disabled_gives_base_logits(tiny_dir, trained):
    model, _ = trained
    ids = _ids(seed=4)
    base_logits = _logits(_base(tiny_dir)[0], ids)
    adapted = _logits(model, ids)
    with adapter_disabled(model) as ref:
        assert ref is model
        torch.testing.assert_close(_logits(model, ids), base_logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(_logits(model, ids), adapted, rtol=0, atol=0)  # back on
    with pytest.raises(TypeError, match="PeftModel"):
        with adapter_disabled(_base(tiny_dir)[0]):
            pass


# ----------------------------------------------------------------------------- PolicyWithValue


def test_policy_with_value_on_peft_model(tiny_dir, trained, tmp_path):
    model, _ = trained
    policy = PolicyWithValue(model)
    ids = _ids(seed=5)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # a left-padded row
    logits, values = policy(ids, mask)
    assert logits.shape == (*ids.shape, model.config.vocab_size) and values.shape == ids.shape
    with torch.no_grad():
        torch.testing.assert_close(logits[1], model(input_ids=ids[1:]).logits[0], rtol=0, atol=1e-5)
        with adapter_disabled(policy.lm):  # the reference through the same wrapper
            ref_logits, _ = policy(ids, mask)
        base_logits, _ = PolicyWithValue(_base(tiny_dir)[0])(ids, mask)
    torch.testing.assert_close(ref_logits, base_logits, rtol=0, atol=1e-6)

    # Gradients reach the adapters and the value head, never the frozen base.
    policy.zero_grad()
    (logits.float().logsumexp(-1).mean() + (values - 1.0).square().sum()).backward()
    grads = {n: p.grad for n, p in policy.named_parameters() if p.grad is not None}
    assert grads and all("lora_" in n or n.startswith("value_head") for n in grads)
    assert any(n.startswith("value_head") for n in grads) and any("lora_" in n for n in grads)
    policy.zero_grad()

    # Save (adapters + value head + tokenizer) and resume with load_lora_policy.
    with torch.no_grad():
        policy.value_head.linear.bias.fill_(0.25)
    _, tok = _base(tiny_dir)
    policy.save(tmp_path / "ckpt", tok)
    saved = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert ADAPTER_WEIGHTS in saved and VALUE_HEAD_FILE in saved and "model.safetensors" not in saved
    again, tok2 = load_lora_policy(str(tiny_dir), tmp_path / "ckpt", device="cpu")
    assert len(tok2) == len(tok)
    policy.eval()
    again.eval()
    with torch.no_grad():
        for a, b in zip(policy(ids, mask), again(ids, mask)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert trainable_parameters(again.lm)[0] == trainable_parameters(model)[0]
    # A merged checkpoint carries the value head too, so PolicyWithValue.load reads it.
    merged = PolicyWithValue.load(merge_adapters(str(tiny_dir), tmp_path / "ckpt",
                                                 tmp_path / "merged"), device="cpu")
    with torch.no_grad():
        for a, b in zip(policy(ids, mask), merged(ids, mask)):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- 4-bit


def test_4bit_needs_cuda(monkeypatch):
    assert quantization_config(False) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError) as e:
        quantization_config(True)
    msg = str(e.value)
    assert "CUDA" in msg and "pip install .[gpu]" in msg and "LoRA in bf16/fp32" in msg
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        load_4bit("tiny")  # fails before loading anything


def test_4bit_needs_bitsandbytes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # `import bitsandbytes` fails
    with pytest.raises(RuntimeError, match="bitsandbytes, which is not installed"):
        quantization_config(True)
