import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (pip install torch; "
    "scripts/python-check.sh with CLINFORMER_CHECK_TORCH=1)")

import clinformer  # noqa: E402
from clinformer.torch import LinformerSelfAttention  # noqa: E402
from conftest import DATA  # noqa: E402
from reference import close, read_safetensors  # noqa: E402


def torch_reference(m, x):
    # lucidrains' forward, in float64 torch from the module's parameters.
    sd = {k: v.double() for k, v in m.state_dict().items()}
    x = x.double()
    b, n, _ = x.shape
    h, dh = m.heads, m.dim_head
    q = x @ sd["to_q.weight"].T
    keys = x @ sd["to_k.weight"].T
    values = keys if m.share_kv else x @ sd["to_v.weight"].T
    E = sd["proj_k"][:n]
    F = E if m.share_kv else sd["proj_v"][:n]
    kb = torch.einsum("bnd,nk->bkd", keys, E)
    vb = torch.einsum("bnd,nk->bkd", values, F)
    qh = q.reshape(b, n, h, dh).transpose(1, 2)
    kh = kb.reshape(b, m.k, -1, dh).transpose(1, 2).expand(b, h, m.k, dh)
    vh = vb.reshape(b, m.k, -1, dh).transpose(1, 2).expand(b, h, m.k, dh)
    att = torch.softmax(qh @ kh.transpose(-1, -2) * dh ** -0.5, -1)
    o = (att @ vh).transpose(1, 2).reshape(b, n, -1)
    return o @ sd["to_out.weight"].T + sd["to_out.bias"]


@pytest.mark.parametrize("share_kv, one_kv_head", [(False, False),
                                                   (True, True),
                                                   (False, True)])
def test_torch_module_matches_equations(ctx, share_kv, one_kv_head):
    torch.manual_seed(0)
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4,
                               share_kv=share_kv, one_kv_head=one_kv_head,
                               ctx=ctx)
    x = torch.randn(2, 20, 32)
    y = m(x)
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    assert close(y.numpy(), torch_reference(m, x).numpy())


@pytest.mark.parametrize("case", ["lucidrains_attention",
                                  "lucidrains_attention_sharekv_onekv"])
def test_torch_module_loads_lucidrains_state_dict(ctx, case):
    w = read_safetensors(DATA / (case + ".safetensors"))
    share = "to_v.weight" not in w
    m = LinformerSelfAttention(16, seq_len=12, k=4, heads=2, dim_head=8,
                               share_kv=share, one_kv_head=share, ctx=ctx)
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in w.items()})
    x = torch.from_numpy(np.load(DATA / (case + "_x.npy")))
    assert close(m(x).numpy(), np.load(DATA / (case + "_y.npy")))


def test_torch_module_resyncs_changed_parameters(ctx):
    torch.manual_seed(1)
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    x = torch.randn(1, 24, 32)
    before = m(x)
    with torch.no_grad():
        m.to_q.weight.mul_(2.0)  # in place: a new version
    after = m(x)
    assert not torch.equal(before, after)
    assert close(after.numpy(), torch_reference(m, x).numpy())
    m.proj_k = torch.nn.Parameter(torch.randn(24, 8) * 0.1)  # a new object
    assert close(m(x).numpy(), torch_reference(m, x).numpy())


def test_torch_module_masks(ctx):
    torch.manual_seed(2)
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    x = torch.randn(2, 24, 32)
    y = m(x, lengths=torch.tensor([24, 5]))
    short = m(x[1:, :5])
    assert torch.all(y[1, 5:] == 0)
    assert close(y[1:, :5].numpy(), short.numpy())


def test_torch_module_errors(ctx):
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    with pytest.raises(TypeError, match="x has dtype float64"):
        m(torch.zeros(1, 4, 32, dtype=torch.float64))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        m(np.zeros((1, 4, 32), np.float32))
    with pytest.raises(ValueError, match="max_seq_len is 24"):
        m(torch.zeros(1, 25, 32))
    with pytest.raises(ValueError, match="dropout"):
        LinformerSelfAttention(32, seq_len=24, k=8, heads=4, dropout=0.1,
                               ctx=ctx)
    with pytest.raises(clinformer.ShapeError, match="not a multiple"):
        LinformerSelfAttention(30, seq_len=24, k=8, heads=4, ctx=ctx)
    # A non-contiguous tensor is made contiguous, not refused.
    x = torch.randn(1, 32, 24).transpose(1, 2)
    assert close(m(x).numpy(), torch_reference(m, x).numpy())


def test_torch_module_refuses_a_forward_autograd_needs(ctx):
    # Inside a model being trained, the drop-in's parameters would get no
    # gradient (its forward runs outside PyTorch's graph): it raises.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 32),
        LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 20, 32)
    with pytest.raises(clinformer.InvalidArgumentError,
                       match="requires grad.*no_grad"):
        model(x).sum().backward()
    opt.zero_grad()
    # Training mode with trainable parameters, on a plain input.
    m = model[1]
    assert m.training
    with pytest.raises(clinformer.InvalidArgumentError,
                       match="training mode.*no_grad"):
        m(x)
    # An input that requires grad, even in eval mode.
    m.eval()
    xg = torch.randn(2, 20, 32, requires_grad=True)
    with pytest.raises(clinformer.InvalidArgumentError, match="x requires grad"):
        m(xg)
    # The ways out: no_grad, inference_mode, eval on a plain input.
    with torch.no_grad():
        y1 = m(xg)
    with torch.inference_mode():
        y2 = m(xg.detach())
    y3 = m(xg.detach())
    assert torch.equal(y1, y2) and torch.equal(y1, y3)
    assert not y3.requires_grad
    # A fresh drop-in starts in eval mode.
    assert not LinformerSelfAttention(32, seq_len=24, k=8, heads=4,
                                      ctx=ctx).training


def test_torch_module_sees_writes_that_bump_no_version(ctx):
    # In-place writes through .data or numpy leave the version counter as
    # it was; the forward still runs the weights the module holds.
    torch.manual_seed(3)
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    x = torch.randn(1, 24, 32)
    m(x)
    writes = [lambda: m.to_q.weight.data.mul_(3.0),
              lambda: m.proj_k.data.copy_(torch.randn(24, 8) * 0.2),
              lambda: m.to_out.bias.detach().numpy().__setitem__(0, 5.0),
              lambda: m.to_v.weight.detach().numpy().__imul__(-1.0)]
    for write in writes:
        before = m(x)
        write()
        after = m(x)
        assert not torch.equal(before, after)
        assert close(after.numpy(), torch_reference(m, x).numpy())


def test_torch_module_copies_and_pickles_through_its_parameters(ctx):
    import copy
    import gc
    import io
    import pickle

    torch.manual_seed(4)
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    x = torch.randn(2, 20, 32)
    want = m(x)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    copies = [copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m)),
              torch.load(buf, weights_only=False)]
    for c in copies:
        assert c.layer is not m.layer
        assert torch.equal(c(x), want)
    # Each copy owns its layer: collecting one leaves the others working,
    # and a deep copy's parameters are its own.
    deep = copies[1]
    del copies
    gc.collect()
    assert torch.equal(m(x), want)
    with torch.no_grad():
        deep.to_q.weight.mul_(2.0)
    assert not torch.equal(deep(x), want)
    assert torch.equal(m(x), want)


def test_torch_module_refuses_jit_trace(ctx):
    m = LinformerSelfAttention(32, seq_len=24, k=8, heads=4, ctx=ctx)
    with pytest.raises(clinformer.InvalidArgumentError,
                       match="torch.jit.trace cannot record"):
        torch.jit.trace(m, torch.randn(1, 24, 32))
