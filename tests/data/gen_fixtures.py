#!/usr/bin/python3
"""Generate the reference fixtures in tests/data/.

Run from the repository root (or anywhere) with Debian's Python 3:

    /usr/bin/python3 tests/data/gen_fixtures.py

Environment the committed fixtures were produced with (Debian 12):
    Python       3.11.2   (/usr/bin/python3)
    torch        1.13.1+dfsg-4 (Debian package python3-torch; torch.__version__ == "1.13.0a0")
    numpy        1.24.2   (Debian package python3-numpy)
    linformer    0.2.3    (PyPI, installed with --no-deps)
    linformer-pytorch 0.19.3 (PyPI, module linformer_pytorch, installed with --no-deps)
    safetensors  0.8.0    (PyPI)

For each case <case> it writes
    <case>.safetensors   weights (safetensors.torch.save_file(model.state_dict(), ...)
                         for the lucidrains cases, the unshared linformer-pytorch cases and
                         the guide's attention; safetensors.torch.save_model(model, ...) for the
                         linformer-pytorch cases whose E/F projections are shared;
                         safetensors.numpy.save_file for fairseq)
                         with hyperparameters as string metadata
    <case>_x.npy         input, float32 (B, n, dim); int64 token ids (B, n) for the LMs
    <case>_y.npy         output, float32 (B, n, dim); logits (B, n, num_tokens) for the LMs
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

linformer-pytorch cases (PyPI linformer-pytorch 0.19.3, tatp22's Linformer): outputs come from
the package itself, in eval mode, under torch.no_grad(), every dropout 0, float32 on the CPU,
with the package's own initialisation and the LayerNorms perturbed as for lucidrains.  The
package's __init__ also imports its Visualizer, which needs matplotlib; the script therefore
loads the model module linformer_pytorch/linformer_pytorch.py of the installed package on its
own.  Shared dimensions: channels 16, nhead 2 (head dim 8 unless dim_d is set), input_size
N = 12, dim_k 4, dim_ff 32, depth 2, batch 2, and every input has exactly N positions (the
package asserts n == input_size).  The metadata holds the constructor's keyword arguments as
str() writes them (booleans "True"/"False", unlike the lowercase lucidrains/fairseq metadata)
plus "layout".  With parameter_sharing layerwise, headwise or kv (and in the LM and the bare
MHAttention, which share too) one E/F tensor is reachable under several state_dict names;
save_model keeps the first name of each group in sorted order and records every dropped name in
__metadata__ as dropped name -> kept name (MANIFEST.txt lists the groups).  The padded case
stores its key lengths as metadata "lengths" and zeroes the output rows at padded positions.
Each output is recomputed by a float64 NumPy implementation that reads the weights back from
the written .safetensors file (resolving the dropped names through those metadata entries), and
each file is loaded into a freshly built model (safetensors.torch.load_model), which must
reproduce the output bit for bit.

guide_attention: a single-head Linformer attention as commonly written in tutorials (class
LinformerAttention below: biased query/key/value Linears, E and F of shape (k, seq_len) applied
as E[:, :n] @ K, scores scaled by 1/sqrt(embed_dim), no output projection), with n < seq_len.
"""

import importlib.util
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


def record(case, tensors, metadata, x, y, shared=None):
    manifest.append("[%s]" % case)
    manifest.append("  files: %s.safetensors %s_x.npy %s_y.npy" % (case, case, case))
    manifest.append("  metadata: " + ", ".join("%s=%s" % kv for kv in sorted(metadata.items())))
    manifest.append("  x: %s %s" % (x.dtype, tuple(x.shape)))
    manifest.append("  y: %s %s" % (y.dtype, tuple(y.shape)))
    manifest.append("  tensors (%d):" % len(tensors))
    for name, t in tensors.items():
        manifest.append("    %-44s %-8s %s" % (name, str(t.dtype).replace("torch.", ""),
                                               tuple(t.shape)))
    if shared:
        manifest.append("  shared (%d groups; the name kept in the file, then the names dropped "
                        "from it," % len(shared))
        manifest.append("          each stored in __metadata__ as dropped name -> kept name):")
        for kept in sorted(shared):
            manifest.append("    %s" % kept)
            for name in shared[kept]:
                manifest.append("      = %s" % name)
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
# linformer-pytorch cases (PyPI linformer-pytorch 0.19.3, module linformer_pytorch)

def load_linformer_pytorch():
    """The model module of the installed linformer-pytorch.  The package's __init__ also imports
    its Visualizer, which needs matplotlib, so the module file is loaded on its own."""
    spec = importlib.util.find_spec("linformer_pytorch")
    if spec is None:
        sys.exit("linformer-pytorch is not installed (pip install --no-deps "
                 "linformer-pytorch==0.19.3)")
    path = os.path.join(spec.submodule_search_locations[0], "linformer_pytorch.py")
    mspec = importlib.util.spec_from_file_location("linformer_pytorch.linformer_pytorch", path)
    module = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(module)
    return module


lp = load_linformer_pytorch()


def meta_str(**kw):
    """Metadata of the linformer-pytorch and guide cases: each value as str() writes it (so
    booleans are "True"/"False", as the constructor keyword would be written)."""
    return {k: str(v) for k, v in kw.items()}


def save_torch_model_case(case, model, x, y, metadata):
    """safetensors.torch.save_model: for a state_dict in which one tensor is reachable under
    several names, the file keeps one name per group (the first in sorted order) and save_model
    adds every dropped name to __metadata__ as dropped name -> kept name."""
    sd = model.state_dict()
    for name, t in sd.items():
        assert t.dtype == torch.float32, (name, t.dtype)
    path = os.path.join(OUT_DIR, case + ".safetensors")
    safetensors.torch.save_model(model, path, metadata=dict(metadata))
    canonicalise_metadata(path)
    with safetensors.safe_open(path, framework="pt") as f:
        kept = set(f.keys())
        file_md = f.metadata()
    shared = {}
    for name, target in sorted(file_md.items()):
        if name in metadata:
            assert file_md[name] == metadata[name], name
            continue
        assert name in sd and name not in kept and target in kept, (name, target)
        shared.setdefault(target, []).append(name)
    assert kept | set(n for g in shared.values() for n in g) == set(sd)
    x_np = x.numpy()
    y_np = y.numpy().astype(np.float32)
    save_npy(case, x_np, y_np)
    record(case, {n: t for n, t in sd.items() if n in kept}, metadata, x_np, y_np, shared)


def read_weights(case):
    """float64 arrays by state_dict name, read back from <case>.safetensors.  A name that
    save_model dropped is resolved through its __metadata__ entry (dropped name -> kept name)."""
    path = os.path.join(OUT_DIR, case + ".safetensors")
    with safetensors.safe_open(path, framework="numpy") as f:
        w = {n: f.get_tensor(n).astype(np.float64) for n in f.keys()}
        md = f.metadata()
    for name, target in md.items():
        if target in w:
            assert name not in w, name
            w[name] = w[target]
    return w


def save_lp_case(case, model, x, y, metadata, shared):
    if shared:
        save_torch_model_case(case, model, x, y, metadata)
    else:
        save_torch_case(case, model, x, y, metadata)


def check_reload(case, build, x, y, **kwargs):
    """Load the written file into a freshly built model (other seed); it must reproduce y."""
    torch.manual_seed(1000)
    model = build()
    model.eval()
    safetensors.torch.load_model(model, os.path.join(OUT_DIR, case + ".safetensors"))
    with torch.no_grad():
        y2 = model(x, **kwargs)
    if not torch.equal(y, y2):
        sys.exit("%s: reloading the file does not reproduce the output" % case)


def np_lp_compress(w, p, t, method, stride):
    """E or F (key prefix p) applied along the sequence axis of t (B, N, d) -> (B, k, d)."""
    W = w[p + "weight"]
    b = w[p + "bias"]
    if method == "learnable":
        # nn.Linear(input_size, k) on the transposed (B, d, N) tensor: weight (k, N), bias (k,)
        # added once per compressed slot
        return np.einsum("kn,bnd->bkd", W, t) + b[None, :, None]
    assert method == "convolution"
    # nn.Conv1d(d, d, kernel_size=stride, stride=stride) on (B, d, N): weight (d_out, d_in, s),
    # bias (d_out,) added per channel
    s = W.shape[2]
    assert s == stride
    nk = (t.shape[1] - s) // s + 1
    win = np.stack([t[:, j * s:j * s + s, :] for j in range(nk)], 1)     # (B, k, s, d_in)
    return np.einsum("oct,bjtc->bjo", W, win) + b


def np_lp_mha(w, p, x, nhead, method, full_attention, causal, mask, stride):
    """linformer_pytorch MHAttention (not decoder mode).  x (B, N, C); mask (B, N) bool or None."""
    outs = []
    for h in range(nhead):
        q = x @ w[p + "to_q.%d.weight" % h].T                 # (B, N, d), no biases
        k = x @ w[p + "to_k.%d.weight" % h].T
        v = x @ w[p + "to_v.%d.weight" % h].T
        d = q.shape[-1]
        if mask is not None:                                  # padded keys/values zeroed
            k = np.where(mask[:, :, None], k, 0.0)            # before the compression
            v = np.where(mask[:, :, None], v, 0.0)
        if not full_attention:
            k = np_lp_compress(w, p + "heads.%d.E." % h, k, method, stride)
            v = np_lp_compress(w, p + "heads.%d.F." % h, v, method, stride)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        if causal:                                            # query i sees slot j <= i
            n, m = s.shape[1:]
            s = np.where(np.arange(m)[None, :] <= np.arange(n)[:, None], s, -np.inf)
        outs.append(np_softmax(s) @ v)
    o = np.concatenate(outs, -1)                              # channel = head * d + e
    if p + "w_o.weight" in w:
        return o @ w[p + "w_o.weight"].T + w[p + "w_o.bias"]
    o = o @ w[p + "w_o_1.weight"].T + w[p + "w_o_1.bias"]
    return o @ w[p + "w_o_2.weight"].T + w[p + "w_o_2.bias"]


def np_lp_encoder(w, prefix, x, depth, nhead, activation, include_ff, method, full_attention,
                  causal, mask, stride):
    """linformer_pytorch Linformer: post-LayerNorm residuals x = LN(x + f(x)), no final LN."""
    act = np_gelu if activation == "gelu" else (lambda t: np.maximum(t, 0.0))
    i = 0
    for _ in range(depth):
        p = "%sseq.%d." % (prefix, i)
        x = np_layernorm(x + np_lp_mha(w, p + "fn.", x, nhead, method, full_attention, causal,
                                       mask, stride), w[p + "norm.weight"], w[p + "norm.bias"])
        i += 1
        if include_ff:
            p = "%sseq.%d." % (prefix, i)
            h = act(x @ w[p + "fn.w_1.weight"].T + w[p + "fn.w_1.bias"])
            h = h @ w[p + "fn.w_2.weight"].T + w[p + "fn.w_2.bias"]
            if p + "resample.weight" in w:                    # ff_intermediate: width changes
                x = x @ w[p + "resample.weight"].T + w[p + "resample.bias"]
            x = np_layernorm(x + h, w[p + "norm.weight"], w[p + "norm.bias"])
            i += 1
    return x


def lp_kwargs(**kw):
    """Keyword arguments of linformer_pytorch.Linformer: the shared tiny dimensions, every dropout
    0 and the arguments that define the computation, with the per-case overrides."""
    base = dict(input_size=SEQ_LEN, channels=DIM, dim_k=K, dim_ff=FFN_DIM, nhead=HEADS,
                depth=DEPTH, dropout=0, dropout_ff=0, activation="gelu",
                parameter_sharing="layerwise", k_reduce_by_layer=0, full_attention=False,
                include_ff=True, causal=False, method="learnable")
    base.update(kw)
    return base


def case_lp_encoder(case, seed, lengths=None, **overrides):
    kw = lp_kwargs(**overrides)
    build = lambda: lp.Linformer(**kw)
    torch.manual_seed(seed)
    model = build()
    model.eval()
    perturb_layernorms(model)
    x = torch.randn(BATCH, SEQ_LEN, DIM)
    fwd = {}
    mask = None
    if lengths is not None:
        mask = torch.arange(SEQ_LEN)[None, :] < torch.tensor(lengths)[:, None]   # True = keep
        fwd["input_mask"] = mask
    with torch.no_grad():
        y = model(x, **fwd)
    y_out = y
    if mask is not None:
        # the rows of valid positions do not depend on the inputs at padded positions
        x2 = torch.where(mask[:, :, None], x, torch.randn(x.shape))
        with torch.no_grad():
            y2 = model(x2, **fwd)
        assert torch.equal(y[mask], y2[mask])
        y_out = y.masked_fill(~mask[:, :, None], 0.0)
    md = meta_str(layout="linformer_pytorch_encoder", **kw)
    if lengths is not None:
        md["lengths"] = ",".join(str(n) for n in lengths)
    save_lp_case(case, model, x, y_out, md, kw["parameter_sharing"] != "none")
    if kw["causal"]:
        cols = SEQ_LEN if kw["full_attention"] else K      # full attention: the usual triangle
        want = np.arange(cols)[None, :] <= np.arange(SEQ_LEN)[:, None]
        assert np.array_equal(lp.gen_causal_mask(SEQ_LEN, K, kw["full_attention"]).numpy(), want)
    m = None if mask is None else mask.numpy()
    ref = np_lp_encoder(read_weights(case), "", x.double().numpy(), kw["depth"], kw["nhead"],
                        kw["activation"], kw["include_ff"], kw["method"], kw["full_attention"],
                        kw["causal"], m, kw["input_size"] // kw["dim_k"])
    if m is not None:
        ref = np.where(m[:, :, None], ref, 0.0)
    check_close(case, ref, y_out.numpy())
    check_reload(case, build, x, y, **fwd)


def case_lp_lm(case, seed):
    kw = dict(num_tokens=NUM_TOKENS, input_size=SEQ_LEN, channels=DIM, dim_k=K, dim_ff=FFN_DIM,
              nhead=HEADS, depth=DEPTH, dropout=0, dropout_ff=0, dropout_tokens=0,
              activation="gelu", parameter_sharing="layerwise", k_reduce_by_layer=0,
              full_attention=False, include_ff=True, causal=False, method="learnable")
    build = lambda: lp.LinformerLM(**kw)
    torch.manual_seed(seed)
    model = build()
    model.eval()
    perturb_layernorms(model)
    x = torch.randint(0, NUM_TOKENS, (BATCH, SEQ_LEN), dtype=torch.int64)
    with torch.no_grad():
        y = model(x)
    md = meta_str(layout="linformer_pytorch_lm", **kw)
    save_lp_case(case, model, x, y, md, True)
    w = read_weights(case)
    # PositionalEmbedding: inv_freq = 100000^(-2i/C) (a buffer, saved), angle = pos * inv_freq,
    # embedding = concat(sin(angle), cos(angle)) (not interleaved), added to the token embedding
    inv_freq = w["pos_emb.inv_freq"]
    assert np.allclose(inv_freq, 1.0 / 100000.0 ** (np.arange(0, DIM, 2) / DIM), rtol=1e-6)
    ang = np.arange(SEQ_LEN)[:, None] * inv_freq[None, :]
    h = w["to_token_emb.weight"][x.numpy()] + np.concatenate([np.sin(ang), np.cos(ang)], -1)
    h = np_lp_encoder(w, "linformer.", h, DEPTH, HEADS, "gelu", True, "learnable", False, False,
                      None, SEQ_LEN // K)
    ref = h @ w["to_logits.weight"].T + w["to_logits.bias"]
    check_close(case, ref, y.numpy())
    check_reload(case, build, x, y)


def case_lp_mhattention(case, seed):
    kw = dict(input_size=SEQ_LEN, dim=DIM_HEAD, channels=DIM, dim_k=K, nhead=HEADS, dropout=0,
              checkpoint_level="C0", parameter_sharing="headwise", E_proj=None, F_proj=None,
              full_attention=False, causal_mask=None, method="learnable")
    build = lambda: lp.MHAttention(**kw)
    torch.manual_seed(seed)
    model = build()
    model.eval()
    perturb_layernorms(model)            # (none in a bare attention module)
    x = torch.randn(BATCH, SEQ_LEN, DIM)
    with torch.no_grad():
        y = model(x)
    md = meta_str(layout="linformer_pytorch_mhattention",
                  **{k: v for k, v in kw.items() if k not in ("E_proj", "F_proj")})
    save_lp_case(case, model, x, y, md, True)
    ref = np_lp_mha(read_weights(case), "", x.double().numpy(), HEADS, "learnable", False, False,
                    None, SEQ_LEN // K)
    check_close(case, ref, y.numpy())
    check_reload(case, build, x, y)


# ---------------------------------------------------------------------------------------------
# the guide's single-head Linformer attention

class LinformerAttention(torch.nn.Module):
    """Single-head Linformer self-attention as a tutorial writes it: E and F are (k, seq_len)
    parameters applied to the first n positions, no output projection."""

    def __init__(self, embed_dim, seq_len, k):
        super().__init__()
        from math import sqrt
        self.embed_dim = embed_dim
        self.query = torch.nn.Linear(embed_dim, embed_dim)
        self.key = torch.nn.Linear(embed_dim, embed_dim)
        self.value = torch.nn.Linear(embed_dim, embed_dim)
        self.E = torch.nn.Parameter(torch.randn(k, seq_len) / sqrt(k))
        self.F = torch.nn.Parameter(torch.randn(k, seq_len) / sqrt(k))

    def forward(self, x):
        from math import sqrt
        n = x.shape[1]
        Q = self.query(x)
        K_ = self.key(x)
        V = self.value(x)
        K_proj = self.E[:, :n] @ K_                              # (B, k, D)
        V_proj = self.F[:, :n] @ V
        scores = Q @ K_proj.transpose(-2, -1) / sqrt(self.embed_dim)
        P = torch.softmax(scores, dim=-1)
        return P @ V_proj


def case_guide_attention(case, seed, n):
    build = lambda: LinformerAttention(embed_dim=DIM, seq_len=SEQ_LEN, k=K)
    torch.manual_seed(seed)
    model = build()
    model.eval()
    x = torch.randn(BATCH, n, DIM)
    with torch.no_grad():
        y = model(x)
    md = meta_str(layout="guide_attention", embed_dim=DIM, seq_len=SEQ_LEN, k=K)
    save_torch_case(case, model, x, y, md)
    w = read_weights(case)
    x64 = x.double().numpy()
    q = x64 @ w["query.weight"].T + w["query.bias"]
    kx = x64 @ w["key.weight"].T + w["key.bias"]
    vx = x64 @ w["value.weight"].T + w["value.bias"]
    kp = np.einsum("kn,bnd->bkd", w["E"][:, :n], kx)          # biases compressed with the rows
    vp = np.einsum("kn,bnd->bkd", w["F"][:, :n], vx)
    ref = np_softmax(q @ kp.transpose(0, 2, 1) / np.sqrt(DIM)) @ vp
    check_close(case, ref, y.numpy())
    check_reload(case, build, x, y)


# ---------------------------------------------------------------------------------------------

def main():
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    from importlib.metadata import version
    print("torch %s, numpy %s, linformer %s, linformer-pytorch %s, safetensors %s" % (
        torch.__version__, np.__version__, version("linformer"), version("linformer-pytorch"),
        version("safetensors")))
    case_lucid_attention("lucidrains_attention", 1, False, False, N_SHORT)
    case_lucid_attention("lucidrains_attention_sharekv_onekv", 2, True, True, N_SHORT)
    case_lucid_encoder("lucidrains_encoder", 3, N_SHORT, False)
    case_lucid_encoder("lucidrains_encoder_full_len", 4, SEQ_LEN, False)
    case_lucid_encoder("lucidrains_encoder_reversible", 5, N_SHORT, True)
    case_lucid_lm("lucidrains_lm", 6, N_SHORT)
    case_fairseq_attention("fairseq_attention", 7, N_SHORT)
    case_fairseq_encoder_layer("fairseq_encoder_layer", 8, N_SHORT)
    case_lp_encoder("lp_linformer_layerwise", 9, parameter_sharing="layerwise")
    case_lp_encoder("lp_linformer_none", 10, parameter_sharing="none")
    case_lp_encoder("lp_linformer_headwise", 11, parameter_sharing="headwise")
    case_lp_encoder("lp_linformer_kv", 12, parameter_sharing="kv")
    case_lp_encoder("lp_linformer_relu", 13, parameter_sharing="none", activation="relu")
    case_lp_encoder("lp_linformer_kreduce", 14, parameter_sharing="headwise", k_reduce_by_layer=1)
    case_lp_encoder("lp_linformer_dimd", 15, parameter_sharing="none", dim_d=6)
    case_lp_encoder("lp_linformer_wo2", 16, parameter_sharing="none", w_o_intermediate_dim=10)
    case_lp_encoder("lp_linformer_noff", 17, parameter_sharing="none", include_ff=False)
    case_lp_encoder("lp_linformer_full", 18, parameter_sharing="none", full_attention=True)
    case_lp_encoder("lp_linformer_padded", 19, lengths=(SEQ_LEN, 7), parameter_sharing="none")
    case_lp_lm("lp_lm", 20)
    case_lp_mhattention("lp_mhattention", 21)
    case_guide_attention("guide_attention", 22, N_SHORT)
    case_lp_encoder("lp_linformer_conv", 23, parameter_sharing="none", method="convolution")
    case_lp_encoder("lp_linformer_causal", 24, parameter_sharing="none", causal=True)
    case_lp_encoder("lp_linformer_causal_full", 25, parameter_sharing="none", causal=True,
                    full_attention=True)
    case_lp_encoder("lp_linformer_ffint", 26, parameter_sharing="none", ff_intermediate=24,
                    depth=3)
    text = "\n".join(manifest)
    with open(os.path.join(OUT_DIR, "MANIFEST.txt"), "w") as f:
        f.write(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
