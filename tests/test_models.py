"""gamerl.models: the tiny model's tokenizer and chat template, deterministic builds, loading,
batched generation, the value head, and the offline error for missing Qwen3 weights.

Nothing here may touch the Hugging Face hub: offline mode is forced before transformers loads.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import hashlib
import json
import random
import time
from pathlib import Path

import pytest
import torch

from gamerl.models import (IM_END, TINY_MARKER, VALUE_HEAD_FILE, ModelUnavailableError,
                           PolicyWithValue, build_tiny, chat_prompt, count_parameters,
                           ensure_tiny, load_policy, load_reference, load_tokenizer,
                           qwen3_0_6b_config, resolve_model)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def tok(tiny_dir):
    return load_tokenizer(str(tiny_dir))



def test_tokenizer_without_a_pad_token_pads_with_endoftext(tiny_dir, tmp_path):
    """A saved tokenizer with no pad token (many chat models ship none) gets <|endoftext|>,
    never the turn's end; this raised a NameError before load_tokenizer imported the token."""
    import shutil

    copy = tmp_path / "no_pad"
    shutil.copytree(tiny_dir, copy)
    config_file = copy / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config.pop("pad_token")
    config_file.write_text(json.dumps(config))
    tok = load_tokenizer(str(copy))
    assert tok.pad_token == "<|endoftext|>" and tok.padding_side == "left"

@pytest.fixture(scope="module")
def policy(tiny_dir):
    return load_policy(str(tiny_dir), device="cpu")


# ----------------------------------------------------------------------------- tokenizer

ROUND_TRIP = [
    "",
    "hello world",
    "Your password must include a month of the year. May2024XXXV",
    "🥚🐔🐛🐛🐛🔥 🌑🌒🌓🌔🌕🌖🌗🌘",
    "🏋️‍♂️🏋️‍♂️🏋️‍♂️ 🏋️‍♀️ 🏋",              # ZWJ sequences and variation selectors
    "👩‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 ❤️‍🔥",
    "**a**b*c*\\*d*** ***e***",            # bold, italic, escaped asterisk
    "e\u0301 é Å Å ﬁ",                    # non-NFC text must not be normalized
    "中文 日本語 한국어 العربية עברית русский",
    "\x00\x01\t\r\n \n\n   \t  trailing   ",
    "  leading spaces , and ' quotes 's 'll",
    "youtu.be/dQw4w9WgXcQ https://www.youtube.com/watch?v=abc-_DEF123",
    "<|im_start|>user\nhi<|im_end|>\n<think>\n\n</think>\n\n<|endoftext|>",
    "\U0010fffd \ufeff \u200b\u200d",
]


def test_tokenizer_round_trips_any_text(tok):
    rng = random.Random(0)
    # Plus random strings over all of Unicode (no surrogates: they are not valid in UTF-8).
    randoms = ["".join(chr(c) for c in (rng.choice([rng.randrange(0x20, 0x7F),
                                                   rng.randrange(0x80, 0xD800),
                                                   rng.randrange(0xE000, 0x110000)])
                                        for _ in range(rng.randint(1, 40))))
               for _ in range(200)]
    for text in ROUND_TRIP + randoms:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text, repr(text)


def test_tokenizer_vocab_and_special_tokens(tok):
    assert len(tok) == 1024
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == IM_END and tok.bos_token is None
    assert tok.padding_side == "left"
    ids = {t: tok.convert_tokens_to_ids(t)
           for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")}
    assert list(ids.values()) == [0, 1, 2, 1022, 1023]
    for t, i in ids.items():  # each marker is one token, even glued to text
        assert i in tok(f"x{t}y", add_special_tokens=False)["input_ids"]
    assert tok("hello", add_special_tokens=True)["input_ids"] == tok("hello")["input_ids"]
    # Like Qwen's, <think> tags are not "special": skip_special_tokens keeps them.
    ids_ = tok("<think>\n\n</think>\n\nok<|im_end|>")["input_ids"]
    assert tok.decode(ids_, skip_special_tokens=True) == "<think>\n\n</think>\n\nok"
    # Digits are single tokens (digit sums stay visible), game text compresses well.
    assert len(tok("2024", add_special_tokens=False)["input_ids"]) == 4
    rule = "Your password must include a month of the year."
    assert len(tok(rule)["input_ids"]) <= len(rule) / 3


# ----------------------------------------------------------------------------- chat template


def test_chat_template_like_qwen3(tok):
    user = [{"role": "user", "content": "Rule 1: at least 5 characters."}]
    no_think = tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True,
                                       enable_thinking=False)
    assert no_think == ("<|im_start|>user\nRule 1: at least 5 characters.<|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert chat_prompt(tok, user) == no_think
    thinking = tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    assert thinking.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert chat_prompt(tok, user, enable_thinking=True) == thinking
    no_prompt = tok.apply_chat_template(user, tokenize=False)
    assert no_prompt == "<|im_start|>user\nRule 1: at least 5 characters.<|im_end|>\n"

    # Multi-turn: as in Qwen3, assistant turns before the last user message lose their think
    # block; the one after it keeps it (an empty one when it had none).
    conv = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": "r1"},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\npw1"},
        {"role": "user", "content": "r2"},
        {"role": "assistant", "content": "pw2"},
    ]
    assert tok.apply_chat_template(conv, tokenize=False) == (
        "<|im_start|>system\nPlay.<|im_end|>\n"
        "<|im_start|>user\nr1<|im_end|>\n"
        "<|im_start|>assistant\npw1<|im_end|>\n"
        "<|im_start|>user\nr2<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\npw2<|im_end|>\n")
    assert chat_prompt(tok, conv[:4]) == (
        "<|im_start|>system\nPlay.<|im_end|>\n<|im_start|>user\nr1<|im_end|>\n"
        "<|im_start|>assistant\npw1<|im_end|>\n<|im_start|>user\nr2<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    with pytest.raises(Exception, match="unsupported chat role"):
        tok.apply_chat_template([{"role": "robot", "content": "x"}], tokenize=False)


# ----------------------------------------------------------------------------- building


def test_build_tiny_is_deterministic_and_cached(tmp_path, tiny_dir):
    t0 = time.perf_counter()
    again = build_tiny(tmp_path / "again")
    build_s = time.perf_counter() - t0
    files = sorted(p.name for p in tiny_dir.iterdir())
    assert files == sorted(p.name for p in again.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "chat_template.jinja", "generation_config.json", TINY_MARKER} <= set(files)
    for name in files:  # byte-identical, weights and tokenizer included
        assert _sha(tiny_dir / name) == _sha(again / name), name
    a, b = load_tokenizer(str(tiny_dir)), load_tokenizer(str(again))
    text = "Paul 🥚 **a** May 2024 🌕"
    assert a(text)["input_ids"] == b(text)["input_ids"]
    marker = json.loads((again / TINY_MARKER).read_text())
    assert marker["params"]["seed"] == 0 and marker["vocab_size"] == 1024
    assert build_s < 30, f"building tiny took {build_s:.1f}s"

    # ensure_tiny: reuses a current build, rebuilds when the build parameters change.
    mtime = (again / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny(again) == again
    assert (again / "model.safetensors").stat().st_mtime_ns == mtime
    ensure_tiny(again, seed=1)
    assert json.loads((again / TINY_MARKER).read_text())["params"]["seed"] == 1
    assert _sha(again / "model.safetensors") != _sha(tiny_dir / "model.safetensors")
    (again / "config.json").unlink()  # a damaged build is rebuilt too
    ensure_tiny(again)
    assert _sha(again / "model.safetensors") == _sha(tiny_dir / "model.safetensors")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_build_does_not_touch_global_rng(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny(tmp_path / "t")
    assert torch.equal(torch.rand(3), expected)


# ----------------------------------------------------------------------------- loading


def test_load_policy_tiny_by_name(tiny_dir, monkeypatch):
    monkeypatch.setenv("GAMERL_TINY_DIR", str(tiny_dir))
    assert resolve_model("tiny") == (str(tiny_dir), True)
    assert resolve_model(str(tiny_dir)) == (str(tiny_dir), True)
    model, tok = load_policy("tiny", device="cpu")
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert model.config.model_type == "qwen3" and model.config.vocab_size == len(tok)
    assert model.config._attn_implementation == "sdpa"
    assert 200_000 < count_parameters(model) < 400_000


def test_batched_left_padded_generation(policy):
    model, tok = policy
    prompts = [chat_prompt(tok, [{"role": "user", "content": c}]) for c in (
        "Hi",
        "Rule 1: Your password must be at least 5 characters.",
        "Rule 5: The digits in your password must add up to 25. 🥚🐛🐛🐛",
        "Turn 3 of 30.\nYour last password: **a**pple May XXXV 🌕\nRules:\n"
        "[x] Rule 1: at least 5 characters.\n[ ] Rule 2: include a number.",
    )]
    enc = tok(prompts, return_tensors="pt", padding=True)
    lengths = enc["attention_mask"].sum(-1)
    assert len(set(lengths.tolist())) == 4 and (enc["attention_mask"][:, -1] == 1).all()
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, temperature=0.7, top_p=0.9, top_k=50,
                             max_new_tokens=16)
    width = enc["input_ids"].shape[1]
    assert out.shape[0] == 4 and width < out.shape[1] <= width + 16
    assert torch.equal(out[:, :width], enc["input_ids"])  # prompts untouched
    new = out[:, width:]
    assert ((new >= 0) & (new < len(tok))).all()
    texts = tok.batch_decode(new, skip_special_tokens=True)
    assert len(texts) == 4 and all(isinstance(t, str) for t in texts)


def test_load_reference_is_frozen_copy(policy, tiny_dir):
    model, _ = policy
    for ref in (load_reference(model), load_reference(str(tiny_dir), device="cpu")):
        assert not ref.training
        assert not any(p.requires_grad for p in ref.parameters())
        for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            assert torch.equal(p, q), n
    assert any(p.requires_grad for p in model.parameters())  # the policy is untouched
    ref = load_reference(model)
    assert ref.get_input_embeddings().weight.data_ptr() != \
        model.get_input_embeddings().weight.data_ptr()


# ----------------------------------------------------------------------------- value head


def test_policy_with_value_forward_and_padding(policy):
    model, tok = policy
    pv = PolicyWithValue(model)
    texts = ["Rule 1: 🥚 at least five", "May XXXV 2024 **a**"]
    enc = tok(texts, return_tensors="pt", padding=True)
    logits, values = pv(enc["input_ids"], enc["attention_mask"])
    B, T = enc["input_ids"].shape
    assert logits.shape == (B, T, len(tok)) and values.shape == (B, T)
    assert values.dtype == torch.float32 and torch.all(values == 0)  # zero-initialised head
    assert torch.isfinite(logits).all()
    # A left-padded row gives the same logits as the row alone (positions restart at 0).
    for i, text in enumerate(texts):
        alone = tok(text, return_tensors="pt")["input_ids"]
        ref_logits, _ = pv(alone)
        n = alone.shape[1]
        torch.testing.assert_close(logits[i, T - n:], ref_logits[0], atol=1e-4, rtol=1e-4)
        # ...and as the plain LM's forward (our own lm_head call matches the model's).
        torch.testing.assert_close(ref_logits, model(alone).logits, atol=1e-5, rtol=1e-5)
    # Gradients reach both the head and the LM.
    pv.zero_grad()
    (values.sum() + logits.float().logsumexp(-1).mean()).backward()
    assert pv.value_head.linear.weight.grad is not None
    assert model.get_input_embeddings().weight.grad is not None
    model.zero_grad(set_to_none=True)


def test_gradient_checkpointing_gives_same_gradients(tiny_dir):
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [0, 0, 11, 12, 13, 14]])
    mask = (ids != 0).long()
    grads = []
    for ckpt in (False, True):
        model, _ = load_policy(str(tiny_dir), device="cpu", gradient_checkpointing=ckpt)
        on = getattr(model, "is_activation_checkpointing", None)
        assert (model.is_gradient_checkpointing if on is None else on) == ckpt
        pv = PolicyWithValue(model).train()
        with torch.no_grad():
            pv.value_head.linear.weight.fill_(0.1)
        logits, values = pv(ids, mask)
        (logits.float().logsumexp(-1).mean() + values.mean()).backward()
        grads.append(model.get_input_embeddings().weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_policy_with_value_save_load_round_trip(tiny_dir, tmp_path):
    model, tok = load_policy(str(tiny_dir), device="cpu")
    pv = PolicyWithValue(model)
    with torch.no_grad():
        torch.manual_seed(1)
        pv.value_head.linear.weight.normal_()
        pv.value_head.linear.bias.fill_(0.5)
        model.lm_head.weight.add_(0.01)  # tied: changes the embedding too
    pv.save(tmp_path / "ckpt", tokenizer=tok)
    assert (tmp_path / "ckpt" / VALUE_HEAD_FILE).exists()
    loaded = PolicyWithValue.load(tmp_path / "ckpt", device="cpu")
    for (n, p), (m, q) in zip(pv.state_dict().items(), loaded.state_dict().items()):
        assert n == m and torch.equal(p, q), n
    ids = tok(["a **b** 🐔", "c"], return_tensors="pt", padding=True)
    with torch.no_grad():
        a, b = pv(**ids), loaded(**ids)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert load_tokenizer(str(tmp_path / "ckpt"))("🐔")["input_ids"] == tok("🐔")["input_ids"]
    with pytest.raises(FileNotFoundError):
        PolicyWithValue.load(tiny_dir, device="cpu")


# ----------------------------------------------------------------------------- missing weights


def test_missing_qwen_raises_helpful_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError) as err:
        resolve_model("Qwen/Qwen3-0.6B", cache_dir=tmp_path / "empty-cache")
    msg = str(err.value)
    assert "Qwen/Qwen3-0.6B" in msg and "download" in msg and "'tiny'" in msg
    assert "HF_HUB_OFFLINE" in msg
    with pytest.raises(ModelUnavailableError):
        resolve_model(str(tmp_path / "no-such-dir"), cache_dir=tmp_path)
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(ModelUnavailableError, match="config.json"):
        resolve_model(str(tmp_path / "empty-dir"))


def test_hf_cache_snapshot_is_found_offline(tmp_path, monkeypatch, tiny_dir):
    # Lay out a cache the way huggingface_hub does, holding the tiny files under Qwen's name.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B"
    commit = "0" * 40
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (snapshot / "config.json").write_bytes((tiny_dir / "config.json").read_bytes())
    with pytest.raises(ModelUnavailableError):  # a config without weights is not enough
        resolve_model("Qwen/Qwen3-0.6B", cache_dir=tmp_path / "hub")
    for f in tiny_dir.iterdir():
        if f.name != TINY_MARKER:
            (snapshot / f.name).write_bytes(f.read_bytes())
    path, is_tiny = resolve_model("Qwen/Qwen3-0.6B", cache_dir=tmp_path / "hub")
    assert Path(path) == snapshot and not is_tiny
    model, tok = load_policy(path, device="cpu")
    assert model.config.vocab_size == len(tok)


# ----------------------------------------------------------------------------- real size


@pytest.mark.slow
def test_qwen3_0_6b_sized_forward_backward_on_cpu():
    """Random weights at Qwen3-0.6B's real size: a bf16 forward (the dtype the notebook loads it
    in on a GPU), then a forward+backward on 1x64 tokens in fp32. The backward is not run in bf16:
    on a CPU without native bf16 (this project's AVX2 machines) it took 170 s against 10 s in fp32
    (measured 2026-11-23, AMD EPYC, torch 2.13.0+cpu); the CPU default dtype is fp32 anyway."""
    from transformers import AutoModelForCausalLM

    cfg = qwen3_0_6b_config()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.head_dim, cfg.intermediate_size, cfg.vocab_size,
            cfg.max_position_embeddings) == (1024, 28, 16, 8, 128, 3072, 151936, 40960)
    assert cfg.tie_word_embeddings and cfg.rope_parameters["rope_theta"] == 1_000_000
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    n = count_parameters(model)
    assert n == 596_049_920  # 0.6B, of which 0.44B outside the (tied) embedding
    assert n - model.get_input_embeddings().weight.numel() == 440_467_456
    pv = PolicyWithValue(model)
    ids = torch.randint(0, cfg.vocab_size, (1, 64))
    with torch.no_grad():
        logits, values = pv(ids, torch.ones_like(ids))
    assert logits.shape == (1, 64, 151936) and logits.dtype == torch.bfloat16
    assert values.dtype == torch.float32  # the value head runs in fp32 whatever the trunk's dtype
    pv.float().train()
    logits, values = pv(ids, torch.ones_like(ids))
    logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
    loss = -logp.mean() + values.pow(2).mean()
    loss.backward()
    assert torch.isfinite(loss)
    assert model.get_input_embeddings().weight.grad is not None
    assert pv.value_head.linear.weight.grad is not None
