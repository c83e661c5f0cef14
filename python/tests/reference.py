"""Linformer attention in double precision, written from the equations
(tests/reference.c is the C twin):

    Q = X W_q^T + b_q,  K = X W_k^T + b_k,  V = X W_v^T + b_v
    Kbar = E K,  Vbar = F V        (per head; E diag(mask) under padding;
                                    + b_E, b_F per slot with bias_proj)
    O_h = softmax(Q_h Kbar_h^T / sqrt(d_h)) Vbar_h
    Y = O W_out^T + b_out          (rows at padding positions are 0)

Causal full attention masks j > i; causal Linformer (block b) gives each
block's c = k / ceil(N / b) slots only that block's positions, and query i
attends to the slots of the blocks before its own plus exactly positions
(i // b) * b .. i of its own block.  slot_mask (linformer-pytorch's
causal=True): query i sees slots 0..i only; in full mode it is causality.
"""

import math

import numpy as np


def _get(w, name):
    v = w.get(name)
    return None if v is None else np.asarray(v, dtype=np.float64)


def attention(x, w, *, d_model, heads, max_seq_len, k, head_dim=0,
              sharing="headwise", share_kv=False, one_kv_head=False,
              compressed_bias=False, causal_block=0, full=False,
              mask=None, causal=False, mode="linformer", slot_mask=False,
              **unused):
    # unused: bias_* and precision, which the weights dict already says.
    full = full or mode == "full"
    causal = causal or (full and slot_mask)
    x = np.asarray(x, dtype=np.float64)
    squeeze = x.ndim == 2
    if squeeze:
        x = x[None]
        if mask is not None:
            mask = np.asarray(mask)[None]
    B, n, D = x.shape
    dh = head_dim or d_model // heads
    hkv = 1 if one_kv_head else heads
    wq, wk, wv, wo = (_get(w, s) for s in ("W_q", "W_k", "W_v", "W_out"))
    bq, bk, bv, bo = (_get(w, s) for s in ("b_q", "b_k", "b_v", "b_out"))
    E, F = _get(w, "E"), _get(w, "F")
    bE, bF = _get(w, "b_E"), _get(w, "b_F")
    if share_kv or sharing == "key-value":
        F, bF = E, bE
    late = compressed_bias and not full
    lin_causal = causal and not full
    if lin_causal:
        nb = -(-max_seq_len // causal_block)
        c = k // nb
    y = np.zeros((B, n, D))
    for b in range(B):
        mb = np.ones(n, bool) if mask is None else np.asarray(mask[b]) != 0
        xb = x[b]
        q = xb @ wq.T + (bq if bq is not None else 0)
        kk = xb @ wk.T + (bk if bk is not None and not late else 0)
        if share_kv:
            vv = kk.copy()
        else:
            vv = xb @ wv.T + (bv if bv is not None and not late else 0)
        kk[~mb] = 0
        vv[~mb] = 0
        o = np.zeros((n, heads * dh))
        for h in range(heads):
            hk = 0 if hkv == 1 else h
            Kh = kk[:, hk * dh:(hk + 1) * dh]
            Vh = vv[:, hk * dh:(hk + 1) * dh]
            qh = q[:, h * dh:(h + 1) * dh]
            eh = h if sharing == "per-head" else 0
            for i in range(n):
                keys, vals = [], []
                if full:
                    for j in range(n):
                        if mb[j] and not (causal and j > i):
                            keys.append(Kh[j])
                            vals.append(Vh[j])
                else:
                    Eh = E[eh * k:(eh + 1) * k]
                    Fh = F[eh * k:(eh + 1) * k]
                    for j in range(k):
                        if slot_mask and j > i:
                            continue
                        if lin_causal:
                            if j >= (i // causal_block) * c:
                                continue
                            lo = (j // c) * causal_block
                            hi = min(lo + causal_block, n)
                        else:
                            lo, hi = 0, n
                        kb = Eh[j, lo:hi] @ Kh[lo:hi]
                        vb = Fh[j, lo:hi] @ Vh[lo:hi]
                        if compressed_bias:
                            bvv = bk if share_kv else bv
                            if bk is not None:
                                kb = kb + bk[hk * dh:(hk + 1) * dh]
                            if bvv is not None:
                                vb = vb + bvv[hk * dh:(hk + 1) * dh]
                        if bE is not None:
                            kb = kb + bE[eh * k + j]
                            vb = vb + bF[eh * k + j]
                        keys.append(kb)
                        vals.append(vb)
                    if lin_causal:
                        first = (i // causal_block) * causal_block
                        for t in range(first, i + 1):
                            if mb[t]:
                                keys.append(Kh[t])
                                vals.append(Vh[t])
                if not keys:
                    continue
                s = np.array(keys) @ qh[i] / math.sqrt(dh)
                p = np.exp(s - s.max())
                p /= p.sum()
                o[i, h * dh:(h + 1) * dh] = p @ np.array(vals)
        yb = o @ wo.T + (bo if bo is not None else 0)
        yb[~mb] = 0
        y[b] = yb
    return y[0] if squeeze else y


def close(actual, expected, tol=1e-5):
    """|actual - expected| <= tol * (1 + |expected|), elementwise."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return actual.shape == expected.shape and bool(
        np.all(np.abs(actual - expected) <= tol * (1 + np.abs(expected))))


def read_safetensors(path):
    """The float32 tensors of a safetensors file, by name."""
    import json
    import struct

    raw = open(path, "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + size + lo:8 + size + hi],
                                  dtype="<f4").reshape(t["shape"])
    return out
