"""clinformer.torch.from_module on live modules of the real packages
(lucidrains linformer, linformer-pytorch) and the guide's single-head
class: each converted module's output against the module's own, within
1e-5 of the output's scale.  Skipped where a package is not installed."""
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (pip install torch; "
    "scripts/python-check.sh with CLINFORMER_CHECK_TORCH=1)")

import clinformer  # noqa: E402
from clinformer.torch import (  # noqa: E402
    ClinformerModel, LinformerSelfAttention, from_lucidrains, from_module)

TOL = 1e-5


def rel_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def agree(src, conv, *args, **kwargs):
    with torch.no_grad():
        want = src(*args, **kwargs)
        got = conv(*args, **kwargs)
    assert got.shape == want.shape
    err = rel_error(got.numpy(), want.numpy())
    assert err <= TOL, "%s: relative error %g" % (type(src).__name__, err)


def perturb_layernorms(m):
    # LayerNorms start at weight 1, bias 0: move them so that their affine
    # part is exercised.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.add_(0.1 * torch.randn_like(mod.weight))
                mod.bias.add_(0.1 * torch.randn_like(mod.bias))
    return m.eval()


def linformer_pytorch():
    """linformer-pytorch's model module, loaded without the package's
    __init__ (which imports its Visualizer and so matplotlib)."""
    spec = importlib.util.find_spec("linformer_pytorch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("linformer-pytorch is not installed (pip install "
                    "--no-deps linformer-pytorch)")
    path = os.path.join(spec.submodule_search_locations[0],
                        "linformer_pytorch.py")
    s = importlib.util.spec_from_file_location(
        "linformer_pytorch.linformer_pytorch", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def test_from_module_lucidrains(ctx):
    lr = pytest.importorskip("linformer", reason="pip install linformer")
    torch.manual_seed(5)
    x = torch.randn(2, 10, 16)
    att = lr.LinformerSelfAttention(16, 12, k=4, heads=2).eval()
    conv = from_lucidrains(att, ctx)
    assert isinstance(conv, LinformerSelfAttention)
    agree(att, conv, x)
    att = lr.LinformerSelfAttention(16, 12, k=4, heads=2, one_kv_head=True,
                                    share_kv=True).eval()
    agree(att, from_module(att, ctx), x)
    for kw in (dict(), dict(reversible=True, share_kv=True)):
        m = perturb_layernorms(lr.Linformer(16, 12, depth=2, k=4, heads=2,
                                            **kw))
        conv = from_module(m, ctx)
        assert isinstance(conv, ClinformerModel)
        agree(m, conv, torch.randn(2, 12, 16))
    lm = perturb_layernorms(lr.LinformerLM(num_tokens=20, dim=16, seq_len=12,
                                           depth=2, k=4, heads=2))
    agree(lm, from_module(lm, ctx), torch.randint(0, 20, (2, 12)))


LP_BASE = dict(input_size=12, channels=16, dim_k=4, dim_ff=32, nhead=2,
               depth=2, dropout=0, dropout_ff=0)


@pytest.mark.parametrize("kw", [
    dict(parameter_sharing="none"), dict(parameter_sharing="headwise"),
    dict(parameter_sharing="kv"), dict(parameter_sharing="layerwise"),
    dict(activation="relu"),
    dict(k_reduce_by_layer=1, parameter_sharing="headwise"),
    dict(dim_d=6), dict(w_o_intermediate_dim=10), dict(include_ff=False),
    dict(full_attention=True), dict(method="convolution"),
    dict(method="convolution", dim_k=5, parameter_sharing="kv"),
    dict(ff_intermediate=24, parameter_sharing="none", depth=3)], ids=str)
def test_from_module_linformer_pytorch(ctx, kw):
    lp = linformer_pytorch()
    torch.manual_seed(6)
    m = perturb_layernorms(lp.Linformer(**dict(LP_BASE, **kw)))
    agree(m, from_module(m, ctx), torch.randn(2, 12, 16))


def test_from_module_linformer_pytorch_padding(ctx):
    # The package's input_mask zeroes padded K and V rows before the
    # compression; lengths do the same here.  Rows at padding are the
    # package's to define (clinformer writes zeros): the real rows agree.
    lp = linformer_pytorch()
    torch.manual_seed(10)
    m = perturb_layernorms(lp.Linformer(**LP_BASE, parameter_sharing="none"))
    conv = from_module(m, ctx)
    x = torch.randn(2, 12, 16)
    mask = torch.arange(12)[None, :] < torch.tensor([12, 7])[:, None]
    with torch.no_grad():
        want = m(x, input_mask=mask)
        got = conv(x, lengths=torch.tensor([12, 7]))
    assert rel_error(got[mask].numpy(), want[mask].numpy()) <= TOL
    assert torch.all(got[~mask] == 0)


def test_from_module_linformer_pytorch_lm_and_attention(ctx):
    lp = linformer_pytorch()
    torch.manual_seed(7)
    lm = perturb_layernorms(lp.LinformerLM(
        num_tokens=20, input_size=12, channels=16, dim_k=4, dim_ff=32,
        nhead=2, depth=2, dropout=0, dropout_ff=0, dropout_tokens=0))
    agree(lm, from_module(lm, ctx), torch.randint(0, 20, (2, 12)))
    enc = lp.Linformer(**LP_BASE, parameter_sharing="headwise").eval()
    mha = enc.seq[0].fn  # an MHAttention
    agree(mha, from_module(mha, ctx), torch.randn(2, 12, 16))


def test_from_module_linformer_pytorch_causal(ctx, recwarn):
    # causal=True runs with its slot mask, as trained, and warns that the
    # future leaks; with full attention it is the causal mask, no warning.
    lp = linformer_pytorch()
    torch.manual_seed(8)
    x = torch.randn(2, 12, 16)
    for kw in (dict(parameter_sharing="none"), dict(),
               dict(method="convolution")):
        m = perturb_layernorms(lp.Linformer(**dict(LP_BASE, **kw),
                                            causal=True))
        with pytest.warns(clinformer.FutureLeakWarning, match="causal=True"):
            conv = from_module(m, ctx)
        agree(m, conv, x)
    lm = perturb_layernorms(lp.LinformerLM(
        num_tokens=20, input_size=12, channels=16, dim_k=4, dim_ff=32,
        nhead=2, depth=2, dropout=0, dropout_ff=0, dropout_tokens=0,
        causal=True))
    with pytest.warns(clinformer.FutureLeakWarning):
        conv = from_module(lm, ctx)
    agree(lm, conv, torch.randint(0, 20, (2, 12)))
    recwarn.clear()
    m = perturb_layernorms(lp.Linformer(**LP_BASE, causal=True,
                                        full_attention=True))
    conv = from_module(m, ctx)
    assert not [w for w in recwarn
                if issubclass(w.category, clinformer.FutureLeakWarning)]
    agree(m, conv, x)
    # The prefix-safe mode is not the trained mask: refused.
    with pytest.raises(clinformer.InvalidArgumentError, match="causal block"):
        from_module(lp.Linformer(**LP_BASE, causal=True).eval(), ctx,
                    causal_block=4)


def test_from_module_refuses_what_the_loaders_refuse(ctx):
    lp = linformer_pytorch()
    m = lp.Linformer(**LP_BASE, method="no_params").eval()
    with pytest.raises(clinformer.UnsupportedError, match="no_params"):
        from_module(m, ctx)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        from_module("model.safetensors", ctx)
    with pytest.raises(clinformer.InvalidArgumentError, match="lucidrains"):
        from_lucidrains(m, ctx)


class GuideAttention(torch.nn.Module):
    """The guide's single-head class (as tests/data/gen_fixtures.py)."""

    def __init__(self, embed_dim, seq_len, k):
        super().__init__()
        self.embed_dim = embed_dim
        self.query = torch.nn.Linear(embed_dim, embed_dim)
        self.key = torch.nn.Linear(embed_dim, embed_dim)
        self.value = torch.nn.Linear(embed_dim, embed_dim)
        self.E = torch.nn.Parameter(torch.randn(k, seq_len) / k ** 0.5)
        self.F = torch.nn.Parameter(torch.randn(k, seq_len) / k ** 0.5)

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.query(x), self.key(x), self.value(x)
        kp, vp = self.E[:, :n] @ k, self.F[:, :n] @ v
        p = torch.softmax(q @ kp.transpose(-2, -1) / self.embed_dim ** 0.5,
                          -1)
        return p @ vp


def test_from_module_guide_class_and_padding(ctx):
    torch.manual_seed(8)
    g = GuideAttention(16, 12, 4).eval()
    conv = from_module(g, ctx)
    agree(g, conv, torch.randn(2, 12, 16))
    # The converted module is inference only and owns its handle.
    with pytest.raises(clinformer.InvalidArgumentError, match="requires grad"):
        conv(torch.randn(2, 12, 16, requires_grad=True))
    import copy
    with pytest.raises(TypeError, match="convert the source module again"):
        copy.deepcopy(conv)
    lr = pytest.importorskip("linformer", reason="pip install linformer")
    m = perturb_layernorms(lr.Linformer(16, 12, depth=2, k=4, heads=2))
    conv = from_module(m, ctx)
    x = torch.randn(2, 12, 16)
    with torch.no_grad():
        y = conv(x, lengths=torch.tensor([12, 7]))
        alone = conv(x[1:, :7])
    assert torch.all(y[1, 7:] == 0)
    assert rel_error(y[1, :7].numpy(), alone[0].numpy()) <= TOL


class MultiheadLinearAttention(torch.nn.Module):
    """fairseq's examples/linformer MultiheadLinearAttention, self-attention
    path, transcribed from its source (attribute names, initialisation
    shapes and the (T, B, C) forward with the compression before k_proj
    and v_proj): fairseq 0.12.2, its last release, does not import on
    Python 3.11 (facebookresearch/fairseq#5012)."""

    def __init__(self, embed_dim, num_heads, max_seq_len, compressed,
                 shared_kv_compressed=False):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.shared_kv_compressed = shared_kv_compressed
        self.k_proj = torch.nn.Linear(embed_dim, embed_dim)
        self.v_proj = torch.nn.Linear(embed_dim, embed_dim)
        self.q_proj = torch.nn.Linear(embed_dim, embed_dim)
        self.out_proj = torch.nn.Linear(embed_dim, embed_dim)
        k = max_seq_len // compressed
        self.compress_k = torch.nn.Linear(max_seq_len, k, bias=False)
        if not shared_kv_compressed:
            self.compress_v = torch.nn.Linear(max_seq_len, k, bias=False)

    def forward(self, query):
        T, B, C = query.size()
        F = torch.nn.functional
        q = self.q_proj(query)
        kin = F.linear(query.permute(1, 2, 0),
                       self.compress_k.weight[:, 0:T]).permute(2, 0, 1)
        k = self.k_proj(kin)
        cv = self.compress_k if self.shared_kv_compressed else self.compress_v
        vin = F.linear(query.permute(1, 2, 0), cv.weight[:, 0:T])
        v = self.v_proj(vin.permute(2, 0, 1))
        q = (q * self.scaling).contiguous().view(
            T, B * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, B * self.num_heads,
                                self.head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, B * self.num_heads,
                                self.head_dim).transpose(0, 1)
        w = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
        o = torch.bmm(w, v).transpose(0, 1).contiguous().view(T, B, C)
        return self.out_proj(o)


@pytest.mark.parametrize("shared", [False, True], ids=["kv", "shared_kv"])
def test_from_module_fairseq_attention(ctx, shared):
    # The converted module is batch-first (B, n, C), fairseq's (T, B, C).
    torch.manual_seed(9)
    att = MultiheadLinearAttention(16, 2, 12, 3,
                                   shared_kv_compressed=shared).eval()
    conv = from_module(att, ctx)
    assert conv.model.info.layout == "fairseq-attention"
    for n in (12, 9):
        x = torch.randn(2, n, 16)
        with torch.no_grad():
            want = att(x.transpose(0, 1)).transpose(0, 1)
            got = conv(x)
        assert rel_error(got.numpy(), want.numpy()) <= TOL
