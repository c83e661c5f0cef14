"""PyTorch front end: a drop-in, inference-only LinformerSelfAttention,
and from_module(), which converts a live module (lucidrains, linformer-
pytorch, the single-head class, fairseq's attention) into one that runs
on a clinformer Context.

LinformerSelfAttention has the parameters of the lucidrains package's
module of that name (to_q, to_k, to_v, proj_k, proj_v, to_out), so its
state_dict loads both ways, and runs the forward on an OpenCL device
through clinformer.  The forward is inference only: its output carries no
autograd history (train with the lucidrains module, run with this one).
It starts in eval mode, and a forward that autograd would need raises
instead of returning an output that never learns: with grad mode on, an
input that requires grad, or training mode (.train(), as a model being
trained sets it) with parameters that require grad.  Run it under
torch.no_grad() or torch.inference_mode(), or in eval mode on a plain
input.
Parameters are copied to the device again when their content changes,
checked at each forward against the copy last sent (bit for bit): an
optimizer step, load_state_dict, a new Parameter, and in-place writes that
bump no version (p.data.mul_(), writes through p.detach().numpy()) alike.
The module copies (copy.copy, copy.deepcopy) and pickles (pickle,
torch.save) through its parameters: the copy gets a layer of its own on
the process's default context (default_context()).  torch.jit.trace
raises: the forward runs outside PyTorch, and a trace would record its
output as a constant.
"""

import threading

import numpy as np
import torch
from torch import nn

from ._core import Attention, Context, Model
from ._errors import DTypeError, InvalidArgumentError, ShapeError, raise_for

_default = None
_default_lock = threading.Lock()


def default_context():
    """The process's shared Context on the default device (created on
    first use); layers made without ctx use it."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Context()
        return _default


def _dim_head(dim, heads, dim_head):
    """lucidrains' default head width, dim / heads, checked."""
    if dim_head is not None:
        return dim_head
    if dim % heads:
        raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                  "dim %d is not a multiple of heads %d" % (dim, heads))
    return dim // heads


class LinformerSelfAttention(nn.Module):
    """linformer.LinformerSelfAttention(dim, seq_len, k, heads, dim_head,
    one_kv_head, share_kv) on a clinformer Context.  dropout must be 0
    (the forward is inference only)."""

    def __init__(self, dim, seq_len, k=256, heads=8, dim_head=None,
                 one_kv_head=False, share_kv=False, dropout=0.0, *,
                 ctx=None):
        super().__init__()
        dim_head = _dim_head(dim, heads, dim_head)
        if dropout:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "dropout %r: the clinformer forward is inference "
                      "only; use 0" % (dropout,))
        self.seq_len = seq_len
        self.k = k
        self.heads = heads
        self.dim_head = dim_head
        self.share_kv = share_kv
        self.one_kv_head = one_kv_head
        kv_dim = dim_head if one_kv_head else dim_head * heads
        self.to_q = nn.Linear(dim, dim_head * heads, bias=False)
        self.to_k = nn.Linear(dim, kv_dim, bias=False)
        self.proj_k = nn.Parameter(self._init(torch.zeros(seq_len, k)))
        if not share_kv:
            self.to_v = nn.Linear(dim, kv_dim, bias=False)
            self.proj_v = nn.Parameter(self._init(torch.zeros(seq_len, k)))
        self.to_out = nn.Linear(dim_head * heads, dim)
        self._open(ctx)
        self.eval()  # inference only: see forward

    def _open(self, ctx):
        """The clinformer layer on ctx (None: the default context); its
        weights are sent at the next forward."""
        self._ctx = ctx if ctx is not None else default_context()
        self._layer = Attention(self._ctx, d_model=self.to_q.in_features,
                                heads=self.heads, max_seq_len=self.seq_len,
                                k=self.k, head_dim=self.dim_head,
                                one_kv_head=self.one_kv_head,
                                share_kv=self.share_kv, bias_out=True)
        self._synced = {}

    # Copies and pickles carry the parameters, never the device handles.
    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_ctx", "_layer", "_synced"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._open(None)

    @staticmethod
    def _init(t):
        bound = 1.0 / np.sqrt(t.shape[-1])
        return t.uniform_(-bound, bound)

    @property
    def layer(self):
        """The clinformer.Attention this module runs."""
        return self._layer

    def _sources(self):
        src = {"W_q": (self.to_q.weight, False),
               "W_k": (self.to_k.weight, False),
               "W_out": (self.to_out.weight, False),
               "b_out": (self.to_out.bias, False),
               "E": (self.proj_k, True)}  # lucidrains stores E transposed
        if not self.share_kv:
            src["W_v"] = (self.to_v.weight, False)
            src["F"] = (self.proj_v, True)
        return src

    def _sync(self):
        # Compared by content, as bits (a NaN equals itself), with the
        # copy last sent: a version counter misses in-place writes
        # through .data or numpy.
        for name, (p, transpose) in self._sources().items():
            t = p.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            a = t.numpy()
            sent = self._synced.get(name)
            if (sent is not None and sent.shape == a.shape
                    and np.array_equal(sent.view(np.uint32),
                                       a.view(np.uint32))):
                continue
            self._layer.set_weight(name, a.T if transpose else a)
            self._synced[name] = a.copy()

    def _guard(self, x):
        _refuse_trace()
        # The output carries no autograd history: where autograd would
        # need it, raise rather than let a model silently not learn.
        if not torch.is_grad_enabled():
            return
        why = None
        if x.requires_grad:
            why = "x requires grad"
        elif self.training and any(p.requires_grad
                                   for p in self.parameters()):
            why = "the module is in training mode with parameters that " \
                  "require grad"
        if why is not None:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "%s, but the clinformer forward is inference only "
                      "(its output carries no gradient): run it under "
                      "torch.no_grad() or torch.inference_mode(), or call "
                      ".eval() and pass an input that does not require "
                      "grad" % why)

    def forward(self, x, context=None, *, lengths=None, key_mask=None,
                causal=False):
        """x: float32 (B, n, dim) or (n, dim), n <= seq_len, on the CPU;
        returns a new tensor of the same shape.  lengths / key_mask mark
        right padding or masked positions (their output rows are zeros)."""
        if context is not None:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "context: cross-attention is not supported")
        if not isinstance(x, torch.Tensor):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "x must be a torch.Tensor, not %s" % type(x).__name__)
        if x.dtype != torch.float32:
            raise_for(DTypeError, "CLF_EDTYPE",
                      "x has dtype %s; torch.float32 is required"
                      % str(x.dtype).replace("torch.", ""))
        if x.device.type != "cpu":
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "x is on %s; clinformer reads CPU tensors (x.cpu())"
                      % x.device)
        self._guard(x)
        self._sync()
        xin = x.detach().contiguous().numpy()
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.cpu().numpy()
        if isinstance(key_mask, torch.Tensor):
            key_mask = key_mask.cpu().numpy()
        y = self._layer(xin, lengths=lengths, key_mask=key_mask,
                        causal=causal)
        return torch.from_numpy(y)


# ------------------------------------------------- training causal models


class CausalLinformerSelfAttention(nn.Module):
    """The prefix-safe causal Linformer attention in plain PyTorch, to
    train: the parameters (and state_dict names) of the lucidrains
    package's LinformerSelfAttention (to_q, to_k, to_v, proj_k, proj_v,
    to_out), with positions cut into blocks of `block`.  The k slots are
    split evenly over the ceil(seq_len / block) blocks (k must be a
    multiple of their number); the c slots of block m compress only block
    m's positions (the other entries of proj_k and proj_v are unused), and
    the query at t in block m attends to the slots of blocks 0..m-1 and to
    positions m*block..t, under one softmax.  Nothing after t reaches the
    output at t.  clinformer runs its state_dict (Model.load(...,
    causal_block=block), or from_module) with causal=True and in a stream,
    with the same outputs.  Differentiable; dropout applies to the
    attention weights in training mode, as lucidrains'."""

    def __init__(self, dim, seq_len, k=256, heads=8, dim_head=None,
                 one_kv_head=False, share_kv=False, dropout=0.0, *, block):
        super().__init__()
        dim_head = _dim_head(dim, heads, dim_head)
        blocks = (seq_len + block - 1) // block if block > 0 else 0
        if block < 1 or k % blocks:
            raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                      "k %d must be a multiple of the %d blocks of %d "
                      "positions (block %d, seq_len %d)"
                      % (k, blocks, block, block, seq_len))
        self.seq_len, self.k, self.heads = seq_len, k, heads
        self.dim_head, self.block = dim_head, block
        self.share_kv, self.one_kv_head = share_kv, one_kv_head
        kv_dim = dim_head if one_kv_head else dim_head * heads
        self.to_q = nn.Linear(dim, dim_head * heads, bias=False)
        self.to_k = nn.Linear(dim, kv_dim, bias=False)
        self.proj_k = nn.Parameter(LinformerSelfAttention._init(
            torch.zeros(seq_len, k)))
        if not share_kv:
            self.to_v = nn.Linear(dim, kv_dim, bias=False)
            self.proj_v = nn.Parameter(LinformerSelfAttention._init(
                torch.zeros(seq_len, k)))
        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(dim_head * heads, dim)

    def _split(self, t, b, rows):
        # (b, rows, heads' columns) -> (b, heads or 1, rows, dim_head)
        return t.reshape(b, rows, -1, self.dim_head).transpose(1, 2)

    def forward(self, x, context=None, *, key_mask=None):
        """x: (B, n, dim), n <= seq_len; key_mask (B, n), nonzero = real
        position (padding takes no part, and its output rows are zeros)."""
        if context is not None:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "context: cross-attention is not supported")
        b, n, _ = x.shape
        if n > self.seq_len:
            raise_for(ShapeError, "CLF_ESEQ_TOO_LONG",
                      "x has %d positions; seq_len is %d" % (n, self.seq_len))
        blk, k = self.block, self.k
        c = k // ((self.seq_len + blk - 1) // blk)
        keys = self.to_k(x)
        values = keys if self.share_kv else self.to_v(x)
        mask = None
        if key_mask is not None:
            mask = torch.as_tensor(key_mask, device=x.device) != 0
            keys = keys * mask[..., None]
            values = values * mask[..., None]
        pos = torch.arange(n, device=x.device)
        slot = torch.arange(k, device=x.device)
        own = (pos[:, None] // blk) == (slot[None, :] // c)  # (n, k)
        ek = self.proj_k[:n] * own
        ev = ek if self.share_kv else self.proj_v[:n] * own
        kbar = self._split(torch.einsum("bnd,nk->bkd", keys, ek), b, k)
        vbar = self._split(torch.einsum("bnd,nk->bkd", values, ev), b, k)
        q = self._split(self.to_q(x), b, n)
        kw, vw = self._split(keys, b, n), self._split(values, b, n)
        scale = self.dim_head ** -0.5
        s_slot = torch.matmul(q, kbar.transpose(-1, -2)) * scale
        s_win = torch.matmul(q, kw.transpose(-1, -2)) * scale
        qblk = pos // blk
        slot_ok = slot[None, :] < (qblk[:, None] * c)
        win_ok = ((pos[None, :] <= pos[:, None])
                  & ((pos[None, :] // blk) == qblk[:, None]))
        if mask is not None:  # a padded query still sees itself: its row
            win_ok = ((win_ok[None] & mask[:, None, :])  # is zeroed below
                      | torch.eye(n, dtype=torch.bool, device=x.device))
            win_ok = win_ok[:, None]
        s_slot = s_slot.masked_fill(~slot_ok, float("-inf"))
        s_win = s_win.masked_fill(~win_ok, float("-inf"))
        attn = self.dropout(torch.softmax(torch.cat([s_slot, s_win], -1), -1))
        out = (torch.matmul(attn[..., :k], vbar)
               + torch.matmul(attn[..., k:], vw))
        y = self.to_out(out.transpose(1, 2).reshape(b, n, -1))
        return y if mask is None else y * mask[..., None]


def make_causal(module, block):
    """Replaces every lucidrains LinformerSelfAttention inside module (a
    lucidrains Linformer or LinformerLM, or the attention itself) by a
    CausalLinformerSelfAttention with the same shape and parameters, so
    that the model trains in the prefix-safe causal form that clinformer
    runs with causal=True and in a stream; returns the module (the
    attention's replacement when module is one)."""
    def convert(att):
        new = CausalLinformerSelfAttention(
            att.to_q.in_features, att.seq_len, k=att.k, heads=att.heads,
            dim_head=att.dim_head,
            one_kv_head=att.to_k.out_features == att.dim_head
            and att.heads > 1, share_kv=att.share_kv,
            dropout=getattr(att.dropout, "p", 0.0), block=block)
        new.load_state_dict(att.state_dict())
        return new.train(att.training)

    if type(module).__name__ == "LinformerSelfAttention":
        return convert(module)
    for name, child in list(module.named_modules()):
        for cname, sub in list(child.named_children()):
            if (type(sub).__name__ == "LinformerSelfAttention"
                    and _package(sub) == "lucidrains"):
                setattr(child, cname, convert(sub))
    return module


# ------------------------------------------------------------ from_module


class ClinformerModel(nn.Module):
    """A whole converted model (from_module): its forward runs a
    clinformer.Model on a Context.  The weights are those of the source
    module when it was converted (convert again after changing them).
    Inference only, as LinformerSelfAttention: a forward autograd would
    need, or torch.jit.trace, raises.  Not copied or pickled (TypeError):
    convert the source module again."""

    def __init__(self, model, source):
        super().__init__()
        self._model = model
        self.source = source
        self.eval()

    @property
    def model(self):
        """The clinformer.Model this module runs."""
        return self._model

    def _refuse_copy(self, *args):
        raise TypeError("a clinformer.torch.ClinformerModel cannot be copied "
                        "or pickled: it owns an OpenCL handle; convert the "
                        "source module again with "
                        "clinformer.torch.from_module")

    __copy__ = __deepcopy__ = __reduce_ex__ = _refuse_copy

    def forward(self, x, *, lengths=None, key_mask=None, causal=False):
        """x: float32 (B, n, D) or (n, D) on the CPU, or for a language
        model integer token ids (B, n) or (n); returns a new tensor (the
        outputs, or the logits)."""
        if not isinstance(x, torch.Tensor):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "x must be a torch.Tensor, not %s" % type(x).__name__)
        if x.device.type != "cpu":
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "x is on %s; clinformer reads CPU tensors (x.cpu())"
                      % x.device)
        _refuse_trace()
        if torch.is_grad_enabled() and x.requires_grad:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "x requires grad, but the clinformer forward is "
                      "inference only (its output carries no gradient): run "
                      "it under torch.no_grad() or torch.inference_mode()")
        xin = x.detach().contiguous().numpy()
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.cpu().numpy()
        if isinstance(key_mask, torch.Tensor):
            key_mask = key_mask.cpu().numpy()
        return torch.from_numpy(self._model(xin, lengths=lengths,
                                            key_mask=key_mask,
                                            causal=causal))


def _refuse_trace():
    if torch.jit.is_tracing():
        raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                  "torch.jit.trace cannot record the clinformer forward (it "
                  "runs outside PyTorch, so the trace would hold its output "
                  "as a constant): call the module itself")


def _package(module):
    """'lucidrains', 'linformer-pytorch' or None, by the module's class."""
    top = type(module).__module__.split(".")[0]
    return {"linformer": "lucidrains",
            "linformer_pytorch": "linformer-pytorch"}.get(top)


def _first(module, name):
    for m in module.modules():
        if type(m).__name__ == name:
            return m
    return None


def _metadata(module):
    """The hyperparameters no tensor shows, read off a live module under
    the names the loaders read from safetensors metadata."""
    md = {}
    package = _package(module)
    causal = _first(module, "CausalLinformerSelfAttention")
    if causal is not None:
        md["heads"] = str(causal.heads)
    elif package == "lucidrains":
        att = _first(module, "LinformerSelfAttention")
        if att is not None:
            md["heads"] = str(att.heads)
    elif package == "linformer-pytorch":
        ff = _first(module, "FeedForward")
        if ff is not None:
            act = ff.activation
            md["activation"] = ("relu" if act is torch.nn.functional.relu
                                else "gelu" if act is torch.nn.functional.gelu
                                else repr(act))
        head = _first(module, "LinearAttentionHead")
        if head is not None:
            md["full_attention"] = str(bool(head.full_attention))
            md["causal"] = str(head.causal_mask is not None)
            md["method"] = ("convolution" if isinstance(head.E, nn.Conv1d)
                            else "learnable" if isinstance(head.E, nn.Linear)
                            else "no_params")
        if hasattr(module, "input_size"):  # no tensor of a Conv1d E shows it
            md["input_size"] = str(module.input_size)
        if getattr(module, "decoder_mode", False):
            md["decoder_mode"] = "True"
    else:
        # fairseq's MultiheadLinearAttention (examples/linformer): its
        # compress_k and num_heads; the tensors show the rest.
        att = next((m for m in module.modules()
                    if hasattr(m, "compress_k") and hasattr(m, "num_heads")),
                   None)
        if att is not None:
            md["heads"] = str(att.num_heads)
    return md


def _write_safetensors(path, tensors, metadata):
    """A safetensors file of float32 tensors (each name of a state_dict,
    shared ones written under every name)."""
    import json
    import struct

    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def from_module(module, ctx=None, *, precision="float", causal_block=0,
                mode=None):
    """A live PyTorch module converted to one that runs on a clinformer
    Context (ctx, else default_context()), without files of the caller's:
    a lucidrains LinformerSelfAttention becomes this package's drop-in
    LinformerSelfAttention (parameters copied); any other module whose
    state_dict clinformer.Model.load reads (lucidrains Linformer and
    LinformerLM, linformer-pytorch Linformer, LinformerLM and MHAttention,
    the single-head class, fairseq's attention) becomes a ClinformerModel,
    its hyperparameters read off the module.  A linformer-pytorch model
    built with causal=True runs with its slot mask, as trained, and warns
    (FutureLeakWarning) that its outputs depend on later positions.  What
    the loaders refuse (method="no_params", ...) raises their error."""
    import os
    import tempfile

    if not isinstance(module, nn.Module):
        raise_for(DTypeError, "CLF_EDTYPE",
                  "module must be a torch.nn.Module, not %s"
                  % type(module).__name__)
    if (_package(module) == "lucidrains"
            and type(module).__name__ == "LinformerSelfAttention"):
        m = LinformerSelfAttention(
            module.to_q.in_features, module.seq_len, k=module.k,
            heads=module.heads, dim_head=module.dim_head,
            one_kv_head=module.to_k.out_features == module.dim_head
            and module.heads > 1, share_kv=module.share_kv, ctx=ctx)
        m.load_state_dict(module.state_dict())
        return m
    causal = _first(module, "CausalLinformerSelfAttention")
    if causal is not None and not causal_block:
        causal_block = causal.block  # trained prefix-safe: its blocks
    ctx = ctx if ctx is not None else default_context()
    tensors = {k: v.detach().cpu().numpy()
               for k, v in module.state_dict().items()}
    with tempfile.TemporaryDirectory(prefix="clinformer-") as d:
        path = os.path.join(d, "module.safetensors")
        _write_safetensors(path, tensors, _metadata(module))
        model = Model.load(ctx, path, precision=precision,
                           causal_block=causal_block, mode=mode)
    return ClinformerModel(model, type(module).__name__)


def from_lucidrains(module, ctx=None, **kwargs):
    """from_module for the lucidrains package's modules."""
    if _package(module) != "lucidrains":
        raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                  "%s is not a module of the lucidrains linformer package; "
                  "use from_module" % type(module).__name__)
    return from_module(module, ctx, **kwargs)
