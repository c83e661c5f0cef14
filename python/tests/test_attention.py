import numpy as np
import pytest

import clinformer
from reference import attention as ref_attention
from reference import close, read_safetensors
from conftest import DATA

SHAPE = dict(d_model=32, heads=4, max_seq_len=24, k=8)

CONFIGS = {
    "plain": {},
    "biases": dict(bias_q=True, bias_k=True, bias_v=True, bias_out=True),
    "per_head": dict(sharing="per-head"),
    "key_value": dict(sharing="key-value"),
    "share_kv_one_kv_head": dict(share_kv=True, one_kv_head=True),
    "head_dim": dict(heads=2, head_dim=8),
    "compressed_bias": dict(bias_k=True, bias_v=True, compressed_bias=True),
    # A bias per compressed slot (linformer-pytorch's E and F).
    "bias_proj": dict(bias_proj=True, bias_out=True),
    "bias_proj_per_head": dict(bias_proj=True, sharing="per-head"),
    "bias_proj_key_value": dict(bias_proj=True, sharing="key-value",
                                bias_k=True),
}


def make(ctx, seed=1, **kw):
    desc = dict(SHAPE, **kw)
    att = clinformer.Attention(ctx, **desc)
    att.randomize(seed)
    return att, desc


def reference(att, desc, x, **kw):
    return ref_attention(x, att.weights(), **desc, **kw)


def poisoned(shape):
    # Unwritten output elements would show as NaN.
    return np.full(shape, np.nan, dtype=np.float32)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_attention_matches_reference(ctx, rng, name):
    att, desc = make(ctx, **CONFIGS[name])
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    y = att(x, out=poisoned(x.shape))
    assert close(y, reference(att, desc, x))
    assert np.abs(y).max() > 1e-3  # not trivially zero


def test_attention_unbatched_input(ctx, rng):
    att, desc = make(ctx)
    x = rng.standard_normal((17, 32)).astype(np.float32)
    y = att(x)
    assert y.shape == (17, 32)
    assert close(y, reference(att, desc, x))


def test_attention_full_mode_and_causal(ctx, rng):
    att, desc = make(ctx, mode="full")
    assert att.mode == "full"
    x = rng.standard_normal((2, 24, 32)).astype(np.float32)
    assert close(att(x), reference(att, desc, x))
    assert close(att(x, causal=True), reference(att, desc, x, causal=True))


def test_attention_slot_mask(ctx, rng):
    # linformer-pytorch's causal=True mask: query i sees slots 0..i (and
    # with n < N, padding); in full mode the causal mask.
    att, desc = make(ctx, slot_mask=True, bias_proj=True)
    assert att.slot_mask
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    assert close(att(x), reference(att, desc, x))
    unmasked = reference(att, dict(desc, slot_mask=False), x)
    assert not close(att(x), unmasked)
    mask = np.ones((2, 20), bool)
    mask[1, 9:] = False
    assert close(att(x, key_mask=mask), reference(att, desc, x, mask=mask))
    att.mode = "full"
    assert close(att(x), reference(att, desc, x, mode="full"))
    att.mode = "linformer"
    with pytest.raises(clinformer.UnsupportedError, match="slot_mask"):
        att(x, causal=True)
    with pytest.raises(clinformer.InvalidArgumentError, match="exclude"):
        clinformer.Attention(ctx, **SHAPE, slot_mask=True, causal_block=6)


def test_attention_causal_linformer_blocks(ctx, rng):
    # N 24, block 6: 4 blocks of c = 2 slots.
    att, desc = make(ctx, causal_block=6)
    x = rng.standard_normal((2, 24, 32)).astype(np.float32)
    y = att(x, causal=True)
    assert close(y, reference(att, desc, x, causal=True))
    # Nothing after t reaches position t.
    x2 = x.copy()
    x2[:, 13:] = rng.standard_normal((2, 11, 32))
    assert np.array_equal(att(x2, causal=True)[:, :13], y[:, :13])


def test_attention_lengths_equal_key_mask(ctx, rng):
    att, desc = make(ctx)
    x = rng.standard_normal((3, 20, 32)).astype(np.float32)
    lengths = [20, 7, 1]
    mask = np.arange(20)[None, :] < np.array(lengths)[:, None]
    y = att(x, lengths=lengths)
    assert close(y, reference(att, desc, x, mask=mask))
    assert np.all(y[1, 7:] == 0) and np.all(y[2, 1:] == 0)
    assert np.array_equal(att(x, key_mask=mask), y)


def test_attention_key_mask_nan_is_refused(ctx, rng):
    att, desc = make(ctx)
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    mask = np.ones((2, 20), np.float32)
    mask[1, 3] = np.nan
    with pytest.raises(clinformer.InvalidArgumentError, match=r"NaN at \(1, 3\)"):
        att(x, key_mask=mask)


def test_attention_key_mask_holes(ctx, rng):
    att, desc = make(ctx, mode="full")
    x = rng.standard_normal((2, 16, 32)).astype(np.float32)
    mask = rng.random((2, 16)) < 0.6
    mask[:, 0] = True
    y = att(x, key_mask=mask)
    assert close(y, reference(att, desc, x, mask=mask))
    att.mode = "linformer"
    y = att(x, key_mask=mask.astype(np.int32))
    assert close(y, reference(att, dict(desc, mode="linformer"), x,
                              mask=mask))


def test_attention_right_padding_equals_shorter_sequence(ctx, rng):
    att, _ = make(ctx)
    x = rng.standard_normal((1, 20, 32)).astype(np.float32)
    short = att(np.ascontiguousarray(x[:, :9]))
    padded = att(x, lengths=[9])
    assert close(padded[:, :9], short)


def test_attention_fixture_weights_set_by_name(ctx):
    # The lucidrains module's own weights and output (made by PyTorch).
    w = read_safetensors(DATA / "lucidrains_attention.safetensors")
    x = np.load(DATA / "lucidrains_attention_x.npy")
    want = np.load(DATA / "lucidrains_attention_y.npy")
    att = clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=4,
                               head_dim=8, bias_out=True)
    att.set_weight("W_q", w["to_q.weight"])
    att.set_weight("W_k", w["to_k.weight"])
    att.set_weight("W_v", w["to_v.weight"])
    att.set_weight("W_out", w["to_out.weight"])
    att.set_weight("b_out", w["to_out.bias"])
    att.set_weight("E", w["proj_k"].T)  # lucidrains stores E transposed
    att.set_weight("F", w["proj_v"].T)
    assert np.array_equal(att.weight("E"), w["proj_k"].T)
    assert close(att(x), want)


def test_attention_weights_read_back(ctx, rng):
    att, _ = make(ctx, bias_q=True)
    wq = rng.standard_normal((32, 32))
    att.set_weight("W_q", wq)
    got = att.weight("W_q")
    assert got.dtype == np.float32 and np.array_equal(got, wq.astype(
        np.float32))
    assert not got.flags.writeable
    assert att.weight_shape("E") == (8, 24)
    assert set(att.used_weights()) == {"W_q", "W_k", "W_v", "W_out", "b_q",
                                       "E", "F"}
    assert att.d_model == 32 and att.k == 8 and att.sharing == "headwise"
    assert att.bias_q is True and att.precision == "float"


def test_attention_half_precision_close_to_float(ctx, rng):
    att, desc = make(ctx, precision="half")
    x = rng.standard_normal((1, 20, 32)).astype(np.float32)
    assert att.precision == "half"
    assert close(att(x), reference(att, desc, x), tol=3e-3)


@pytest.mark.parametrize("sharing", ["headwise", "per-head"])
def test_attention_bias_proj_with_padding(ctx, rng, sharing):
    # The slot bias is added whatever the padding (linformer-pytorch zeroes
    # the masked K and V rows before its nn.Linear over the sequence).
    att, desc = make(ctx, bias_proj=True, sharing=sharing)
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    lengths = np.array([20, 13], dtype=np.uint32)
    mask = np.arange(20)[None, :] < lengths[:, None]
    y = att(x, lengths=lengths, out=poisoned(x.shape))
    assert close(y, reference(att, desc, x, mask=mask))
    # Causal Linformer has no slot bias.
    att2, _ = make(ctx, bias_proj=True, causal_block=6)
    with pytest.raises(clinformer.UnsupportedError, match="bias_proj"):
        att2(np.ascontiguousarray(x[:, :18]), causal=True)


@pytest.mark.parametrize("compression", ["mean", "max"])
def test_attention_pooling_compressions(ctx, rng, compression):
    # Mean and max pooling over windows of w = N // k positions of the
    # projected keys and values (docs/design.md section 1.1), in float64.
    att = clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=22, k=5,
                               bias_k=True, compression=compression)
    att.randomize(3)
    assert att.compression == compression
    assert "E" not in att.weights()
    w = att.weights()
    x = rng.standard_normal((2, 22, 16)).astype(np.float64)
    q = x @ w["W_q"].astype(np.float64).T
    kk = x @ w["W_k"].astype(np.float64).T + w["b_k"]
    vv = x @ w["W_v"].astype(np.float64).T
    win = 22 // 5
    pool = np.mean if compression == "mean" else np.max
    kb = np.stack([pool(kk[:, j * win:j * win + win], 1) for j in range(5)], 1)
    vb = np.stack([pool(vv[:, j * win:j * win + win], 1) for j in range(5)], 1)
    out = np.zeros_like(q)
    for h in range(2):
        c = slice(8 * h, 8 * h + 8)
        s = q[:, :, c] @ kb[:, :, c].transpose(0, 2, 1) / np.sqrt(8)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, :, c] = (p / p.sum(-1, keepdims=True)) @ vb[:, :, c]
    want = out @ w["W_out"].astype(np.float64).T
    assert close(att(x.astype(np.float32)), want)
    with pytest.raises(clinformer.InvalidArgumentError, match="compression"):
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=22, k=5,
                             compression="avg")
