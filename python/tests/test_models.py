import numpy as np
import pytest

import clinformer
from conftest import DATA
from reference import close

CASES = {
    "lucidrains_attention": "lucidrains-attention",
    "lucidrains_attention_sharekv_onekv": "lucidrains-attention",
    "lucidrains_encoder": "lucidrains-encoder",
    "lucidrains_encoder_full_len": "lucidrains-encoder",
    "lucidrains_encoder_reversible": "lucidrains-encoder",
    "lucidrains_lm": "lucidrains-lm",
    "fairseq_attention": "fairseq-attention",
    "fairseq_encoder_layer": "fairseq-encoder-layer",
}


# linformer-pytorch 0.19.3 and the guide's single-head class.
LP_CASES = dict(
    {"lp_linformer_" + v: "linformer-pytorch"
     for v in ("layerwise", "none", "headwise", "kv", "relu", "kreduce",
               "dimd", "wo2", "noff", "full", "conv", "causal_full", "ffint")},
    lp_lm="linformer-pytorch-lm", lp_mhattention="linformer-pytorch-attention",
    guide_attention="single-head-attention")


@pytest.mark.parametrize("case", sorted(CASES) + sorted(LP_CASES))
def test_model_matches_torch(ctx, case):
    m = clinformer.Model.load(ctx, DATA / (case + ".safetensors"))
    x = np.load(DATA / (case + "_x.npy"))
    want = np.load(DATA / (case + "_y.npy"))
    assert m.info.layout == {**CASES, **LP_CASES}[case]
    # full_attention=True in the file: the model runs full attention.
    assert m.mode == ("full" if case.endswith("_full") else "linformer")
    y = m(x)
    assert y.dtype == np.float32
    assert close(y, want)
    m.close()


def test_model_causal_slot_mask_warns_and_matches(ctx):
    # causal=True: run as trained with its slot mask, and a warning that
    # the output at t depends on later positions (which it does).
    with pytest.warns(clinformer.FutureLeakWarning, match="causal=True"):
        m = clinformer.Model.load(
            ctx, DATA / "lp_linformer_causal.safetensors")
    assert m.info.slot_mask and m.mode == "linformer"
    x = np.load(DATA / "lp_linformer_causal_x.npy")
    y = m(x)
    assert close(y, np.load(DATA / "lp_linformer_causal_y.npy"))
    x2 = x.copy()
    x2[:, 6:] += 1.0
    assert not np.array_equal(m(x2)[:, :6], y[:, :6])
    m.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_explicit_layout_and_heads(ctx, case):
    m = clinformer.Model.load(ctx, str(DATA / (case + ".safetensors")),
                              layout=CASES[case], heads=2)
    x = np.load(DATA / (case + "_x.npy"))
    assert close(m(x), np.load(DATA / (case + "_y.npy")))
    m.close()


def test_model_info_and_unbatched(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors")
    assert m.info.layers == 2 and m.info.d_model == 16
    assert m.info.ffn_dim == 64 and not m.is_lm
    x = np.load(DATA / "lucidrains_encoder_x.npy")
    want = np.load(DATA / "lucidrains_encoder_y.npy")
    assert close(m(np.ascontiguousarray(x[1])), want[1])


def test_model_lm_token_ids_int32_and_unbatched(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_lm.safetensors")
    assert m.is_lm and m.info.vocab == 20
    ids = np.load(DATA / "lucidrains_lm_x.npy")
    want = np.load(DATA / "lucidrains_lm_y.npy")
    assert close(m(ids.astype(np.int32)), want)
    assert close(m(ids[0].tolist()), want[0])


def test_model_lengths_pad_rows_zero(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors")
    x = np.load(DATA / "lucidrains_encoder_x.npy")
    y = m(x, lengths=[3, 10])
    assert np.all(y[0, 3:] == 0)
    short = m(np.ascontiguousarray(x[:1, :3]))
    assert close(y[:1, :3], short)


def test_model_half_precision(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors",
                              precision="half")
    x = np.load(DATA / "lucidrains_encoder_x.npy")
    assert close(m(x), np.load(DATA / "lucidrains_encoder_y.npy"), tol=5e-3)


def test_model_full_mode_differs(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors",
                              mode="full")
    x = np.load(DATA / "lucidrains_encoder_x.npy")
    assert m.mode == "full"
    assert not close(m(x), np.load(DATA / "lucidrains_encoder_y.npy"))


def test_model_causal_blocks_prefix_safe(ctx, rng):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors",
                              causal_block=3)
    x = np.load(DATA / "lucidrains_encoder_x.npy")
    y = m(x, causal=True)
    x2 = x.copy()
    x2[:, 6:] = rng.standard_normal((2, 4, 16))
    y2 = m(x2, causal=True)
    assert np.array_equal(y2[:, :6], y[:, :6])
    assert not np.array_equal(y2[:, 6:], y[:, 6:])
    # Not causal, every position sees the change.
    assert not np.array_equal(m(x2)[:, :6], m(x)[:, :6])


def test_model_key_mask_equals_lengths(ctx):
    m = clinformer.Model.load(ctx, DATA / "fairseq_encoder_layer.safetensors")
    x = np.load(DATA / "fairseq_encoder_layer_x.npy")
    mask = np.arange(10)[None, :] < np.array([[4], [10]])
    assert np.array_equal(m(x, key_mask=mask), m(x, lengths=[4, 10]))
