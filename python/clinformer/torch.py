"""PyTorch front end: a drop-in, inference-only LinformerSelfAttention.

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

from ._core import Attention, Context
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


class LinformerSelfAttention(nn.Module):
    """linformer.LinformerSelfAttention(dim, seq_len, k, heads, dim_head,
    one_kv_head, share_kv) on a clinformer Context.  dropout must be 0
    (the forward is inference only)."""

    def __init__(self, dim, seq_len, k=256, heads=8, dim_head=None,
                 one_kv_head=False, share_kv=False, dropout=0.0, *,
                 ctx=None):
        super().__init__()
        if dim_head is None:
            if dim % heads:
                raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                          "dim %d is not a multiple of heads %d"
                          % (dim, heads))
            dim_head = dim // heads
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
        if torch.jit.is_tracing():
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "torch.jit.trace cannot record the clinformer "
                      "forward (it runs outside PyTorch, so the trace would "
                      "hold its output as a constant): call the module "
                      "itself")
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
