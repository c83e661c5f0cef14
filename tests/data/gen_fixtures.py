#!/usr/bin/python3
"""Generate the reference fixtures in tests/data/.

Run from the repository root (or anywhere) with Debian's Python 3:

    /usr/bin/python3 tests/data/gen_fixtures.py

Environment the committed fixtures were produced with (Debian 12):
    Python       3.11.2   (/usr/bin/python3)
    torch        1.13.1+dfsg-4 (Debian package python3-torch; torch.__version__ == "1.13.0a0")
    numpy        1.24.2   (Debian package python3-numpy)
    linformer    0.2.3    (PyPI, installed with --no-deps)
    safetensors  0.8.0    (PyPI)

For each case <case> it writes
    <case>.safetensors   weights (safetensors.torch.save_file(model.state_dict(), ...)
                         for the lucidrains cases; safetensors.numpy.save_file for fairseq)
                         with hyperparameters as string metadata
    <case>_x.npy         input, float32 (B, n, dim); int64 token ids (B, n) for the LM
    <case>_y.npy         output, float32 (B, n, dim); logits (B, n, num_tokens) for the LM
and MANIFEST.txt listing every tensor name, dtype and shape per case.  The only change made to
a file written by save_file is that the keys of its __metadata__ map are put in sorted order
(safetensors writes them in hash order), so regenerating reproduces every file byte for byte.

lucidrains cases: outputs come from the installed `linformer` package itself, in eval mode,
under torch.no_grad(), dropout 0, float32 on the CPU.  The package's own initialisation is kept,
except that every LayerNorm (which starts at weight = 1, bias = 0) gets weight = 1 + 0.1 * N(0,1)
and bias = 0.1 * N(0,1) so that its affine part is exercised.  Linear biases (to_out, FFN w1/w2,
to_logits) are nonzero under the default nn.Linear initialisation and are left as they are.
Each output is also recomputed here by an independent float64 NumPy implementation working
from the state_dict names alone, and the script fails if the two disagree.

fairseq cases: fairseq's examples/linformer MultiheadLinearAttention (self-attention path) and a
post-LayerNorm TransformerEncoderLayer around it, reproduced in NumPy (float64 compute, stored as
float32), batch-first.  A second transcription in torch that follows fairseq's own
(T, B, C) code path (F.linear with compress_k.weight[:, 0:tgt_len], q *= scaling after q_proj)
is checked against it.
"""

import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

import linformer
import safetensors
import safetensors.numpy
import safetensors.torch

OUT_DIR = os.path.dirname(os.path.abspath(__file__))

# Shared tiny dimensions.
DIM = 16
HEADS = 2
DIM_HEAD = DIM // HEADS
SEQ_LEN = 12   # N, max sequence length
K = 4          # compressed length
DEPTH = 2
BATCH = 2
N_SHORT = 10   # n < N: exercises slicing of the first n positions of the projections
NUM_TOKENS = 20
FFN_DIM = 32   # fairseq encoder layer FFN width
LN_EPS = 1e-5

manifest = []


# ---------------------------------------------------------------------------------------------
# helpers

def meta(**kw):
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in kw.items()}


def perturb_layernorms(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                m.bias.copy_(0.1 * torch.randn_like(m.bias))


def record(case, tensors, metadata, x, y):
    manifest.append("[%s]" % case)
    manifest.append("  files: %s.safetensors %s_x.npy %s_y.npy" % (case, case, case))
    manifest.append("  metadata: " + ", ".join("%s=%s" % kv for kv in sorted(metadata.items())))
    manifest.append("  x: %s %s" % (x.dtype, tuple(x.shape)))
    manifest.append("  y: %s %s" % (y.dtype, tuple(y.shape)))
    manifest.append("  tensors (%d):" % len(tensors))
    for name, t in tensors.items():
        manifest.append("    %-44s %-8s %s" % (name, str(t.dtype).replace("torch.", ""),
                                               tuple(t.shape)))
    manifest.append("")


def canonicalise_metadata(path):
    """safetensors writes the __metadata__ map in hash order, which differs from run to run.
    Rewrite just that map with its keys sorted (same bytes otherwise, same length), so that
    regenerating the fixtures reproduces them byte for byte."""
    with open(path, "rb") as f:
        blob = f.read()
    hlen = struct.unpack("<Q", blob[:8])[0]
    header = blob[8:8 + hlen].decode("utf-8")
    start = header.index('"__metadata__":{')
    end = header.index("}", start) + 1
    md = json.loads("{" + header[start:end] + "}")["__metadata__"]
    canon = '"__metadata__":' + json.dumps(md, sort_keys=True, separators=(",", ":"))
    assert len(canon) == end - start
    header = header[:start] + canon + header[end:]
    with open(path, "wb") as f:
        f.write(blob[:8] + header.encode("utf-8") + blob[8 + hlen:])
    os.chmod(path, 0o644)


def save_npy(case, x, y):
    np.save(os.path.join(OUT_DIR, case + "_x.npy"), x)
    np.save(os.path.join(OUT_DIR, case + "_y.npy"), y)


def save_torch_case(case, model, x, y, metadata):
    sd = model.state_dict()
    for name, t in sd.items():
        assert t.dtype == torch.float32, (name, t.dtype)
    path = os.path.join(OUT_DIR, case + ".safetensors")
    safetensors.torch.save_file(sd, path, metadata=metadata)
    canonicalise_metadata(path)
    x_np = x.numpy()
    y_np = y.numpy().astype(np.float32)
    save_npy(case, x_np, y_np)
    record(case, sd, metadata, x_np, y_np)


def check_close(case, ref, got, atol=2e-5, rtol=2e-5):
    err = np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))
    if not np.allclose(ref, got, atol=atol, rtol=rtol):
        sys.exit("%s: independent reference disagrees (max abs err %g)" % (case, err))
    print("  %-40s check ok (max abs err %.3g)" % (case, err))


# ---------------------------------------------------------------------------------------------
# independent float64 NumPy implementations (used as checks only)

def np_layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)        # biased variance
    return (x - mu) / np.sqrt(var + LN_EPS) * w + b


def np_gelu(x):
    from math import erf, sqrt
    verf = np.vectorize(erf)
    return 0.5 * x * (1.0 + verf(x / sqrt(2.0)))         # exact erf GELU


def np_softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def np_lucid_attn(sd, p, x, heads, dim_head, share_kv):
    """lucidrains LinformerSelfAttention.  x (B, n, D); p is the key prefix."""
    g = lambda name: sd[p + name].double().numpy()
    b, n, _ = x.shape
    q = x @ g("to_q.weight").T                              # (B, n, h*dh)
    keys = x @ g("to_k.weight").T                           # (B, n, kv_dim)
    values = keys if share_kv else x @ g("to_v.weight").T
    E = g("proj_k")[:n]                                     # (n, k)
    Fm = E if share_kv else g("proj_v")[:n]
    kb = np.einsum("bnd,nk->bkd", keys, E)                  # (B, k, kv_dim)
    vb = np.einsum("bnd,nk->bkd", values, Fm)
    kk = kb.shape[1]
    qh = q.reshape(b, n, heads, dim_head).transpose(0, 2, 1, 3)
    kh = kb.reshape(b, kk, -1, dim_head).transpose(0, 2, 1, 3)   # kv heads: h or 1
    vh = vb.reshape(b, kk, -1, dim_head).transpose(0, 2, 1, 3)
    kh = np.broadcast_to(kh, (b, heads, kk, dim_head))
    vh = np.broadcast_to(vh, (b, heads, kk, dim_head))
    att = np_softmax(np.einsum("bhnd,bhkd->bhnk", qh, kh) * dim_head ** -0.5)
    o = np.einsum("bhnk,bhkd->bhnd", att, vh).transpose(0, 2, 1, 3).reshape(b, n, -1)
    return o @ g("to_out.weight").T + g("to_out.bias")


def np_lucid_ff(sd, p, x):
    g = lambda name: sd[p + name].double().numpy()
    h = np_gelu(x @ g("w1.weight").T + g("w1.bias"))
    return h @ g("w2.weight").T + g("w2.bias")


def np_prenorm(sd, p, x):
    g = lambda name: sd[p + name].double().numpy()
    return np_layernorm(x, g("norm.weight"), g("norm.bias"))


def np_lucid_encoder(sd, prefix, x, depth, heads, dim_head, share_kv, reversible):
    attn = lambda l, p, v: np_lucid_attn(sd, p + "fn.", np_prenorm(sd, p, v),
                                         heads, dim_head, share_kv)
    ff = lambda l, p, v: np_lucid_ff(sd, p + "fn.", np_prenorm(sd, p, v))
    if not reversible:
        for l in range(depth):
            x = x + attn(l, "%snet.layers.%d.0." % (prefix, l), x)
            x = x + ff(l, "%snet.layers.%d.1." % (prefix, l), x)
        return x
    x1, x2 = x, x
    for l in range(depth):
        x1 = x1 + attn(l, "%snet.blocks.%d.f.net." % (prefix, l), x2)
        x2 = x2 + ff(l, "%snet.blocks.%d.g.net." % (prefix, l), x1)
    return x1 + x2


# ---------------------------------------------------------------------------------------------
# lucidrains cases

def case_lucid_attention(case, seed, share_kv, one_kv_head, n):
    torch.manual_seed(seed)
    model = linformer.LinformerSelfAttention(dim=DIM, seq_len=SEQ_LEN, k=K, heads=HEADS,
                                             share_kv=share_kv, one_kv_head=one_kv_head)
    model.eval()
    perturb_layernorms(model)            # (none in a bare attention module)
    x = torch.randn(BATCH, n, DIM)
    with torch.no_grad():
        y = model(x)
    md = meta(layout="lucidrains_attention", dim=DIM, heads=HEADS, dim_head=DIM_HEAD, k=K,
              seq_len=SEQ_LEN, share_kv=share_kv, one_kv_head=one_kv_head)
    ref = np_lucid_attn(model.state_dict(), "", x.double().numpy(), HEADS, DIM_HEAD, share_kv)
    check_close(case, ref, y.numpy())
    save_torch_case(case, model, x, y, md)


def case_lucid_encoder(case, seed, n, reversible):
    torch.manual_seed(seed)
    model = linformer.Linformer(dim=DIM, seq_len=SEQ_LEN, depth=DEPTH, k=K, heads=HEADS,
                                reversible=reversible)
    model.eval()
    perturb_layernorms(model)
    x = torch.randn(BATCH, n, DIM)
    with torch.no_grad():
        y = model(x)
    md = meta(layout="lucidrains_encoder", dim=DIM, heads=HEADS, dim_head=DIM_HEAD, depth=DEPTH,
              k=K, seq_len=SEQ_LEN, share_kv=False, one_kv_head=False, reversible=reversible,
              ffn_dim=4 * DIM)
    ref = np_lucid_encoder(model.state_dict(), "", x.double().numpy(), DEPTH, HEADS, DIM_HEAD,
                           False, reversible)
    check_close(case, ref, y.numpy())
    save_torch_case(case, model, x, y, md)


def case_lucid_lm(case, seed, n):
    torch.manual_seed(seed)
    model = linformer.LinformerLM(num_tokens=NUM_TOKENS, dim=DIM, seq_len=SEQ_LEN, depth=DEPTH,
                                  k=K, heads=HEADS)
    model.eval()
    perturb_layernorms(model)
    x = torch.randint(0, NUM_TOKENS, (BATCH, n), dtype=torch.int64)
    with torch.no_grad():
        y = model(x)
    md = meta(layout="lucidrains_lm", dim=DIM, heads=HEADS, dim_head=DIM_HEAD, depth=DEPTH, k=K,
              seq_len=SEQ_LEN, share_kv=False, one_kv_head=False, reversible=False,
              num_tokens=NUM_TOKENS, ffn_dim=4 * DIM)
    sd = model.state_dict()
    h = sd["token_emb.weight"].double().numpy()[x.numpy()] \
        + sd["pos_emb.weight"].double().numpy()[:n][None]
    h = np_lucid_encoder(sd, "linformer.", h, DEPTH, HEADS, DIM_HEAD, False, False)
    ref = h @ sd["to_logits.weight"].double().numpy().T + sd["to_logits.bias"].double().numpy()
    check_close(case, ref, y.numpy())
    save_torch_case(case, model, x, y, md)


# ---------------------------------------------------------------------------------------------
# fairseq cases (NumPy float64 reproduction of examples/linformer)

def fairseq_attn_params(prefix, g):
    """Random parameters; g is a torch.Generator.  Returns an ordered dict of float32 arrays."""
    def rnd(*shape, scale=0.2):
        return (torch.randn(*shape, generator=g) * scale).numpy().astype(np.float32)
    p = {}
    p[prefix + "k_proj.weight"] = rnd(DIM, DIM, scale=0.3)
    p[prefix + "k_proj.bias"] = rnd(DIM)
    p[prefix + "v_proj.weight"] = rnd(DIM, DIM, scale=0.3)
    p[prefix + "v_proj.bias"] = rnd(DIM)
    p[prefix + "q_proj.weight"] = rnd(DIM, DIM, scale=0.3)
    p[prefix + "q_proj.bias"] = rnd(DIM)
    p[prefix + "compress_k.weight"] = rnd(K, SEQ_LEN, scale=0.3)
    p[prefix + "compress_v.weight"] = rnd(K, SEQ_LEN, scale=0.3)
    p[prefix + "out_proj.weight"] = rnd(DIM, DIM, scale=0.3)
    p[prefix + "out_proj.bias"] = rnd(DIM)
    return p


def np_fairseq_attn(p, prefix, x):
    """x (B, n, D) float64 -> (B, n, D).  Self-attention path of MultiheadLinearAttention."""
    g = lambda name: p[prefix + name].astype(np.float64)
    b, n, d = x.shape
    q = (x @ g("q_proj.weight").T + g("q_proj.bias")) * DIM_HEAD ** -0.5
    kx = np.einsum("kn,bnd->bkd", g("compress_k.weight")[:, :n], x)   # (B, k, D)
    vx = np.einsum("kn,bnd->bkd", g("compress_v.weight")[:, :n], x)
    kk = kx @ g("k_proj.weight").T + g("k_proj.bias")                  # bias once per slot
    vv = vx @ g("v_proj.weight").T + g("v_proj.bias")
    qh = q.reshape(b, n, HEADS, DIM_HEAD).transpose(0, 2, 1, 3)
    kh = kk.reshape(b, K, HEADS, DIM_HEAD).transpose(0, 2, 1, 3)
    vh = vv.reshape(b, K, HEADS, DIM_HEAD).transpose(0, 2, 1, 3)
    att = np_softmax(np.einsum("bhnd,bhkd->bhnk", qh, kh))
    o = np.einsum("bhnk,bhkd->bhnd", att, vh).transpose(0, 2, 1, 3).reshape(b, n, d)
    return o @ g("out_proj.weight").T + g("out_proj.bias")


def np_fairseq_layer(p, x):
    g = lambda name: p[name].astype(np.float64)
    x = np_layernorm(x + np_fairseq_attn(p, "self_attn.", x),
                     g("self_attn_layer_norm.weight"), g("self_attn_layer_norm.bias"))
    h = np_gelu(x @ g("fc1.weight").T + g("fc1.bias")) @ g("fc2.weight").T + g("fc2.bias")
    return np_layernorm(x + h, g("final_layer_norm.weight"), g("final_layer_norm.bias"))


def torch_fairseq_attn(p, prefix, query):
    """Transcription of fairseq's code path; query (T, B, C) float64 torch."""
    w = lambda name: torch.from_numpy(p[prefix + name]).double()
    tgt_len, bsz, embed_dim = query.size()
    q = F.linear(query, w("q_proj.weight"), w("q_proj.bias"))
    k_input = query.permute(1, 2, 0).contiguous()
    k_input = F.linear(k_input, w("compress_k.weight")[:, 0:tgt_len]).permute(2, 0, 1).contiguous()
    k = F.linear(k_input, w("k_proj.weight"), w("k_proj.bias"))
    v_input = query.permute(1, 2, 0).contiguous()
    v_input = F.linear(v_input, w("compress_v.weight")[:, 0:tgt_len]).permute(2, 0, 1).contiguous()
    v = F.linear(v_input, w("v_proj.weight"), w("v_proj.bias"))
    q = q * DIM_HEAD ** -0.5
    q = q.contiguous().view(tgt_len, bsz * HEADS, DIM_HEAD).transpose(0, 1)
    k = k.contiguous().view(-1, bsz * HEADS, DIM_HEAD).transpose(0, 1)
    v = v.contiguous().view(-1, bsz * HEADS, DIM_HEAD).transpose(0, 1)
    attn_weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
    attn = torch.bmm(attn_weights, v)
    attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
    return F.linear(attn, w("out_proj.weight"), w("out_proj.bias"))


def torch_fairseq_layer(p, x):
    w = lambda name: torch.from_numpy(p[name]).double()
    residual = x
    x = torch_fairseq_attn(p, "self_attn.", x)
    x = F.layer_norm(residual + x, (DIM,), w("self_attn_layer_norm.weight"),
                     w("self_attn_layer_norm.bias"), LN_EPS)
    residual = x
    x = F.gelu(F.linear(x, w("fc1.weight"), w("fc1.bias")))
    x = F.linear(x, w("fc2.weight"), w("fc2.bias"))
    return F.layer_norm(residual + x, (DIM,), w("final_layer_norm.weight"),
                        w("final_layer_norm.bias"), LN_EPS)


def save_numpy_case(case, p, x, y, md):
    path = os.path.join(OUT_DIR, case + ".safetensors")
    safetensors.numpy.save_file(p, path, metadata=md)
    canonicalise_metadata(path)
    save_npy(case, x, y)
    record(case, p, md, x, y)


def case_fairseq_attention(case, seed, n):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    p = fairseq_attn_params("", g)
    x = (torch.randn(BATCH, n, DIM, generator=g)).numpy().astype(np.float32)
    y64 = np_fairseq_attn(p, "", x.astype(np.float64))
    t = torch_fairseq_attn(p, "", torch.from_numpy(x).double().transpose(0, 1)).transpose(0, 1)
    check_close(case, t.numpy(), y64, atol=1e-10, rtol=1e-10)
    md = meta(layout="fairseq_attention", dim=DIM, heads=HEADS, dim_head=DIM_HEAD, k=K,
              seq_len=SEQ_LEN)
    save_numpy_case(case, p, x, y64.astype(np.float32), md)


def case_fairseq_encoder_layer(case, seed, n):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s, scale=0.2: (torch.randn(*s, generator=g) * scale).numpy().astype(np.float32)
    p = fairseq_attn_params("self_attn.", g)
    p["self_attn_layer_norm.weight"] = 1.0 + rnd(DIM, scale=0.1)
    p["self_attn_layer_norm.bias"] = rnd(DIM, scale=0.1)
    p["fc1.weight"] = rnd(FFN_DIM, DIM, scale=0.3)
    p["fc1.bias"] = rnd(FFN_DIM)
    p["fc2.weight"] = rnd(DIM, FFN_DIM, scale=0.2)
    p["fc2.bias"] = rnd(DIM)
    p["final_layer_norm.weight"] = 1.0 + rnd(DIM, scale=0.1)
    p["final_layer_norm.bias"] = rnd(DIM, scale=0.1)
    x = (torch.randn(BATCH, n, DIM, generator=g)).numpy().astype(np.float32)
    y64 = np_fairseq_layer(p, x.astype(np.float64))
    t = torch_fairseq_layer(p, torch.from_numpy(x).double().transpose(0, 1)).transpose(0, 1)
    check_close(case, t.numpy(), y64, atol=1e-10, rtol=1e-10)
    md = meta(layout="fairseq_encoder_layer", dim=DIM, heads=HEADS, dim_head=DIM_HEAD, k=K,
              seq_len=SEQ_LEN, ffn_dim=FFN_DIM, activation="gelu", normalize_before=False,
              layernorm_eps="1e-05")
    save_numpy_case(case, p, x, y64.astype(np.float32), md)


# ---------------------------------------------------------------------------------------------

def main():
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    from importlib.metadata import version
    print("torch %s, numpy %s, linformer %s, safetensors %s" % (
        torch.__version__, np.__version__, version("linformer"), version("safetensors")))
    case_lucid_attention("lucidrains_attention", 1, False, False, N_SHORT)
    case_lucid_attention("lucidrains_attention_sharekv_onekv", 2, True, True, N_SHORT)
    case_lucid_encoder("lucidrains_encoder", 3, N_SHORT, False)
    case_lucid_encoder("lucidrains_encoder_full_len", 4, SEQ_LEN, False)
    case_lucid_encoder("lucidrains_encoder_reversible", 5, N_SHORT, True)
    case_lucid_lm("lucidrains_lm", 6, N_SHORT)
    case_fairseq_attention("fairseq_attention", 7, N_SHORT)
    case_fairseq_encoder_layer("fairseq_encoder_layer", 8, N_SHORT)
    text = "\n".join(manifest)
    with open(os.path.join(OUT_DIR, "MANIFEST.txt"), "w") as f:
        f.write(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
