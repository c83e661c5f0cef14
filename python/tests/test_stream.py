"""Streams from Python (Model.stream, Attention.stream) against the
whole-sequence causal forward, and clinformer.torch's trainable
prefix-safe causal attention: trained a few steps, then run by clinformer
in causal mode and in a stream, within 1e-5 of the module's own output
(relative to its largest value)."""
import copy
import pickle

import numpy as np
import pytest

import clinformer
from conftest import DATA

TOL = 1e-5


def rel_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def fed(stream, x, chunk, key_mask=None):
    out = []
    for t in range(0, x.shape[1], chunk):
        km = None if key_mask is None else key_mask[:, t:t + chunk]
        out.append(stream.append(x[:, t:t + chunk], key_mask=km))
    return np.concatenate(out, axis=1)


def test_stream_model_matches_whole_forward(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors",
                              causal_block=3)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 12, 16)).astype(np.float32)
    km = np.ones((2, 12), np.uint8)
    km[1, 7:] = 0
    want = m(x, key_mask=km, causal=True)
    with m.stream(batch=2) as s:
        for chunk in (1, 3, 4):
            s.reset()
            got = fed(s, x, chunk, km)
            assert rel_error(got, want) <= 1e-6, chunk
        assert s.position == 12
        assert s.state_bytes > 0
        with pytest.raises(clinformer.ShapeError, match="max_seq_len"):
            s.append(x[:, :1])
        s.reset()
        with pytest.raises(clinformer.ShapeError, match="takes"):
            s.append(x[:1, :2])
        with pytest.raises(clinformer.ShapeError, match="takes"):
            s.append(np.zeros((2, 1, 8), np.float32))
        assert s.position == 0
        for copy_of in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="Model.stream"):
                copy_of(s)
    assert s.closed


def test_stream_refuses_plain_linformer_and_closes_with_model(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors")
    with pytest.raises(clinformer.InvalidArgumentError,
                       match="causal_block"):
        m.stream(batch=1)
    m.mode = "full"
    s = m.stream(batch=1)
    x = np.ones((1, 2, 16), np.float32)
    assert s.append(x).shape == (1, 2, 16)
    m.close()
    assert s.closed
    with pytest.raises(clinformer.ClosedError):
        s.append(x)


def test_stream_lm_tokens(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_lm.safetensors",
                              causal_block=3)
    ids = np.arange(24).reshape(2, 12) % m.info.vocab
    want = m(ids, causal=True)
    with m.stream(batch=2) as s:
        got = fed(s, ids, 4)
    assert got.shape == (2, 12, m.info.vocab)
    assert rel_error(got, want) <= 1e-6


torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (pip install torch; "
    "scripts/python-check.sh with CLINFORMER_CHECK_TORCH=1)")
from clinformer.torch import (  # noqa: E402
    CausalLinformerSelfAttention, from_module, make_causal)


def train(module, x, steps=5):
    opt = torch.optim.Adam(module.parameters(), lr=1e-2)
    target = torch.randn(module(x).shape)
    module.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = ((module(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
    return module.eval()


def test_trained_causal_attention_runs_in_clinformer(ctx):
    torch.manual_seed(7)
    att = CausalLinformerSelfAttention(16, 12, k=8, heads=2, block=3)
    x = torch.randn(2, 12, 16)
    before = att.proj_k.detach().clone()
    train(att, x)
    assert not torch.equal(before, att.proj_k.detach())  # it learned
    lr = pytest.importorskip("linformer", reason="pip install linformer")
    plain = lr.LinformerSelfAttention(16, 12, k=8, heads=2)
    assert sorted(att.state_dict()) == sorted(plain.state_dict())
    conv = from_module(att, ctx)
    km = torch.ones(2, 12, dtype=torch.bool)
    km[1, 9:] = False
    with torch.no_grad():
        for mask in (None, km):
            want = att(x, key_mask=mask).numpy()
            got = conv(x, key_mask=mask, causal=True).numpy()
            assert rel_error(got, want) <= TOL
            with conv.model.stream(batch=2) as s:
                got = fed(s, x.numpy(), 3,
                          None if mask is None else mask.numpy())
            assert rel_error(got, want) <= TOL


def test_causal_attention_ignores_the_future_bit_for_bit():
    torch.manual_seed(2)
    att = CausalLinformerSelfAttention(16, 12, k=4, heads=2, block=3).eval()
    x = torch.randn(1, 12, 16)
    with torch.no_grad():
        y = att(x)
        for t in range(11):
            xp = x.clone()
            xp[:, t + 1:] = torch.randn(1, 11 - t, 16) * 100
            assert torch.equal(att(xp)[:, :t + 1], y[:, :t + 1]), t


def test_made_causal_encoder_and_lm_run_in_clinformer(ctx):
    lr = pytest.importorskip("linformer", reason="pip install linformer")
    torch.manual_seed(4)
    enc = make_causal(lr.Linformer(16, 12, depth=2, k=4, heads=2), block=3)
    names = sorted(lr.Linformer(16, 12, depth=2, k=4, heads=2).state_dict())
    assert sorted(enc.state_dict()) == names
    x = torch.randn(2, 12, 16)
    train(enc, x, steps=3)
    conv = from_module(enc, ctx)
    with torch.no_grad():
        want = enc(x).numpy()
    assert rel_error(conv(x, causal=True).numpy(), want) <= TOL
    with conv.model.stream(batch=2) as s:
        assert rel_error(fed(s, x.numpy(), 4), want) <= TOL
    lm = make_causal(lr.LinformerLM(num_tokens=20, dim=16, seq_len=12,
                                    depth=2, k=4, heads=2), block=3).eval()
    ids = torch.randint(0, 20, (2, 12))
    conv = from_module(lm, ctx)
    with torch.no_grad():
        want = lm(ids).numpy()
    assert rel_error(conv(ids, causal=True).numpy(), want) <= TOL
    with conv.model.stream(batch=2) as s:
        assert rel_error(fed(s, ids.numpy(), 1), want) <= TOL


def test_causal_attention_refuses_bad_shapes():
    with pytest.raises(clinformer.ShapeError, match="multiple of the 4"):
        CausalLinformerSelfAttention(16, 12, k=6, heads=2, block=3)
    att = CausalLinformerSelfAttention(16, 12, k=4, heads=2, block=3)
    with pytest.raises(clinformer.ShapeError, match="seq_len"):
        att(torch.randn(1, 13, 16))
