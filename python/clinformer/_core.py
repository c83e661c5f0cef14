"""Devices, contexts, attention layers and models over the C library.

Threads: a Context may be shared by threads; a layer or model is used by
one thread at a time, which each object's lock enforces (a second thread
waits).  cffi releases the GIL during every library call, so forwards of
different layers run in parallel.
"""

import collections
import threading
import weakref

import numpy as np

from ._clinformer import ffi, lib
from ._errors import (
    ClosedError,
    DTypeError,
    FutureLeakWarning,
    InvalidArgumentError,
    NotFoundError,
    ShapeError,
    check,
    raise_for,
)

Device = collections.namedtuple(
    "Device",
    "index stable_name name platform vendor type memory max_alloc "
    "local_mem compute_units max_clock_mhz driver version c_version "
    "fp16 fp64",
)
Device.__doc__ = """An OpenCL device as clf_devices_list() describes it.

``stable_name`` ("pocl:0") selects it in Context() whatever other platforms
come and go; ``type`` is "gpu", "cpu" or "other"; memory in bytes."""

ModelInfo = collections.namedtuple(
    "ModelInfo",
    "layout d_model heads head_dim max_seq_len k layers ffn_dim vocab "
    "reversible share_kv one_kv_head layerwise slot_mask",
)

_SHARING = {
    "headwise": lib.CLF_SHARE_HEADWISE,
    "per-head": lib.CLF_SHARE_PER_HEAD,
    "key-value": lib.CLF_SHARE_KEY_VALUE,
}
_MODES = {"linformer": lib.CLF_MODE_LINFORMER, "full": lib.CLF_MODE_FULL}
_COMPRESSIONS = {
    "linear": lib.CLF_COMPRESS_LINEAR,
    "mean": lib.CLF_COMPRESS_MEAN,
    "max": lib.CLF_COMPRESS_MAX,
    "conv": lib.CLF_COMPRESS_CONV,
}


def _text(cstr):
    return ffi.string(cstr).decode("utf-8", "replace")


def _device(info):
    kind = "gpu" if info.is_gpu else "cpu" if info.is_cpu else "other"
    return Device(
        index=info.index,
        stable_name=_text(info.stable_name),
        name=_text(info.name),
        platform=_text(info.platform),
        vendor=_text(info.vendor),
        type=kind,
        memory=info.global_mem,
        max_alloc=info.max_alloc,
        local_mem=info.local_mem,
        compute_units=info.compute_units,
        max_clock_mhz=info.max_clock_mhz,
        driver=_text(info.driver),
        version=_text(info.version),
        c_version=_text(info.c_version),
        fp16=bool(info.fp16),
        fp64=bool(info.fp64),
    )


def version():
    """The version of the linked C library."""
    return _text(lib.clf_version())


def devices():
    """Every OpenCL device of every platform, in the library's flat index
    order; an empty list when there is no OpenCL platform at all."""
    count = ffi.new("size_t *")
    rc = lib.clf_devices_list(ffi.NULL, 0, count)
    if rc == lib.CLF_ENO_DEVICE:
        return []
    check(rc)
    cap = count[0]
    infos = ffi.new("clf_device_info[]", max(cap, 1))
    check(lib.clf_devices_list(infos, cap, count))
    return [_device(infos[i]) for i in range(min(cap, count[0]))]


def _size(name, value, minimum=1):
    """A size argument as a Python int, checked before it reaches C."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise_for(DTypeError, "CLF_EDTYPE",
                  "%s must be an int, not %s" % (name, type(value).__name__))
    value = int(value)
    if value < minimum or value >= 1 << 62:
        raise_for(ShapeError, "CLF_EBAD_SIZE",
                  "%s %d is out of range (at least %d)" % (name, value,
                                                           minimum))
    return value


def _choice(name, value, table):
    if not isinstance(value, str) or value not in table:
        raise_for(InvalidArgumentError, "CLF_EBAD_ENUM",
                  "%s %r is not one of %s" % (name, value,
                                              ", ".join(sorted(table))))
    return table[value]


def _cstr(what, raw):
    """raw (bytes) for a C string: an embedded NUL would cut it short
    there, so that a different name than given reached the library."""
    if b"\0" in raw:
        raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                  "%s holds a NUL character at offset %d"
                  % (what, raw.index(b"\0")))
    return raw


def _precision(value):
    if not isinstance(value, str):
        raise_for(InvalidArgumentError, "CLF_EBAD_ENUM",
                  "precision must be a string (\"float\" or \"half\")")
    out = ffi.new("clf_precision *")
    check(lib.clf_precision_parse(_cstr("precision", value.encode()), out))
    return out[0]


class _OwnsHandle:
    """Context, Attention and Model each own a C handle, freed when the
    object is closed or collected: a copy sharing it would free it under
    the original, so copying and pickling raise TypeError naming what to
    do instead (_copy_hint)."""

    _copy_hint = ""

    def _refuse_copy(self, what):
        raise TypeError("a clinformer.%s cannot be %s: it owns an OpenCL "
                        "handle; %s" % (type(self).__name__, what,
                                        self._copy_hint))

    def __copy__(self):
        self._refuse_copy("copied")

    def __deepcopy__(self, memo):
        self._refuse_copy("copied")

    def __reduce_ex__(self, protocol):
        self._refuse_copy("pickled")


class Context(_OwnsHandle):
    """One OpenCL device: its context, queue and compiled kernels.

    ``selector`` follows clf_context_create(): None (CLINFORMER_DEVICE,
    else the first GPU, else the first CPU), a stable name ("pocl:0"), an
    index ("0"), "cpu", "gpu" or part of a platform or device name.  Use it
    as a context manager or call close(); layers and models keep their
    context alive, and closing it closes them first.  It cannot be copied
    or pickled (TypeError): open another on the same selector.
    """

    _copy_hint = "open another with clinformer.Context(selector)"

    def __init__(self, selector=None, *, profiling=False):
        if selector is not None and not isinstance(selector, str):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "selector must be a string or None, not %s"
                      % type(selector).__name__)
        sel = (ffi.NULL if selector is None
               else _cstr("selector", selector.encode()))
        flags = lib.CLF_CONTEXT_PROFILING if profiling else 0
        out = ffi.new("clf_context **")
        self._ptr = ffi.NULL
        self._lock = threading.Lock()
        self._children = weakref.WeakSet()
        check(lib.clf_context_create_ex(out, sel, flags))
        self._ptr = out[0]

    def _handle(self):
        if self._ptr == ffi.NULL:
            raise_for(ClosedError, "CLF_EINVALID_ARGUMENT",
                      "the context is closed")
        return self._ptr

    def _create(self, child, create):
        """child._ptr = create(handle), under the lock that close() takes,
        so that the context cannot be destroyed while a layer or model is
        being made on it."""
        with self._lock:
            child._ptr = create(self._handle())
            self._children.add(child)

    def _call(self, fn, *args):
        """fn(handle, *args) under the same lock, for the context's own
        calls."""
        with self._lock:
            return fn(self._handle(), *args)

    @property
    def closed(self):
        return self._ptr == ffi.NULL

    def close(self):
        """Closes every layer and model of the context, then the context.
        Idempotent."""
        with self._lock:
            if self._ptr == ffi.NULL:
                return
            for child in list(self._children):
                child.close()
            lib.clf_context_destroy(self._ptr)
            self._ptr = ffi.NULL

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # At interpreter shutdown the module's globals may be gone.
        try:
            if getattr(self, "_ptr", ffi.NULL) != ffi.NULL:
                self.close()
        except Exception:
            pass

    @property
    def device(self):
        """The context's Device."""
        info = ffi.new("clf_device_info *")
        check(self._call(lib.clf_context_device_info, info))
        return _device(info[0])

    def build(self):
        """Builds (or loads from the cache) the kernels now."""
        check(self._call(lib.clf_context_build))

    def finish(self):
        check(self._call(lib.clf_context_finish))

    @property
    def build_log(self):
        return _text(self._call(lib.clf_context_build_log))

    @property
    def kernel_choices(self):
        return _text(self._call(lib.clf_context_kernel_choices))

    @property
    def warnings(self):
        return _text(self._call(lib.clf_context_warnings))

    def __repr__(self):
        if self.closed:
            return "<clinformer.Context closed>"
        return "<clinformer.Context %s>" % self.device.stable_name


def _float_array(name, a, writable=False):
    """a as a float32 C-contiguous ndarray without a copy, or an error
    naming the argument."""
    try:
        arr = np.asarray(a)
    except Exception as e:  # an object numpy cannot view
        raise_for(DTypeError, "CLF_EDTYPE",
                  "%s: not an array (%s)" % (name, e))
    if arr.dtype != np.float32:
        raise_for(DTypeError, "CLF_EDTYPE",
                  "%s has dtype %s; float32 is required (use "
                  "astype(numpy.float32))" % (name, arr.dtype))
    if not arr.flags.c_contiguous:
        raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                  "%s is not C-contiguous (use numpy.ascontiguousarray)"
                  % name)
    if writable and not arr.flags.writeable:
        raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                  "%s is read-only" % name)
    return arr


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1
                                                      else "") + ")"


class _Forward(_OwnsHandle):
    """What Attention and Model share: the lock, closing, the options."""

    _kind = "layer"

    def _init_forward(self, ctx):
        if not isinstance(ctx, Context):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "ctx must be a clinformer.Context, not %s"
                      % type(ctx).__name__)
        ctx._handle()
        self._ctx = ctx
        self._ptr = ffi.NULL
        # Reentrant: set_weight holds it while it asks for the shape.
        self._lock = threading.RLock()
        self._streams = weakref.WeakSet()

    def _handle(self):
        if self._ptr == ffi.NULL:
            raise_for(ClosedError, "CLF_EINVALID_ARGUMENT",
                      "the %s is closed" % self._kind)
        return self._ptr

    @property
    def context(self):
        return self._ctx

    @property
    def closed(self):
        return self._ptr == ffi.NULL

    def close(self):
        """Releases the device memory.  Idempotent."""
        with self._lock:
            if self._ptr != ffi.NULL:
                for st in list(self._streams):
                    st.close()
                self._destroy(self._ptr)
                self._ptr = ffi.NULL

    def stream(self, batch=1):
        """A Stream of `batch` sequences over this layer or model, in
        prefix-safe causal mode (Linformer needs a causal_block; full mode
        keeps a growing key/value cache): `with model.stream(batch=B) as
        s: y = s.append(x_chunk)`."""
        return Stream(self, batch)

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # At interpreter shutdown the module's globals may be gone.
        try:
            if getattr(self, "_ptr", ffi.NULL) != ffi.NULL:
                self.close()
        except Exception:
            pass

    def _opts(self, batch, n, batched, lengths, key_mask, causal):
        """The clf_forward_opts of one call, checked; returns it and the
        cdata arrays it points to (kept alive by the caller)."""
        opts = ffi.new("clf_forward_opts *")
        keep = []
        if lengths is not None and key_mask is not None:
            raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                      "lengths and key_mask: give one, not both")
        if lengths is not None:
            arr = np.asarray(lengths)
            if arr.ndim == 0 and not batched:
                arr = arr.reshape(1)
            if arr.dtype.kind not in "iu":
                raise_for(DTypeError, "CLF_EDTYPE",
                          "lengths must be integers, not %s" % arr.dtype)
            if arr.shape != (batch,):
                raise_for(ShapeError, "CLF_EBAD_SIZE",
                          "lengths has shape %s; the input has %d sequence%s"
                          % (_shape_text(arr.shape), batch,
                             "" if batch == 1 else "s"))
            bad = (arr < 1) | (arr > n)
            if bad.any():
                i = int(np.argmax(bad))
                raise_for(ShapeError, "CLF_EBAD_SIZE",
                          "lengths[%d] = %d is out of range 1..%d"
                          % (i, int(arr[i]), n))
            c = ffi.new("unsigned[]", [int(v) for v in arr])
            keep.append(c)
            opts.lengths = c
        if key_mask is not None:
            arr = np.asarray(key_mask)
            if arr.dtype.kind not in "biuf":
                raise_for(DTypeError, "CLF_EDTYPE",
                          "key_mask must be bool or numeric, not %s"
                          % arr.dtype)
            want = (batch, n)
            if arr.shape != want and not (not batched and arr.shape == (n,)):
                raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                          "key_mask has shape %s; expected %s"
                          % (_shape_text(arr.shape), _shape_text(want)))
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                at = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
                raise_for(InvalidArgumentError, "CLF_EINVALID_ARGUMENT",
                          "key_mask holds NaN at %s: a position is real "
                          "(nonzero) or padding (0), not undecided"
                          % (at,))
            m = np.ascontiguousarray(arr != 0, dtype=np.uint8)
            keep.append(m)
            opts.key_mask = ffi.cast("const unsigned char *",
                                     ffi.from_buffer(m))
        if not isinstance(causal, (bool, np.bool_)):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "causal must be a bool, not %s" % type(causal).__name__)
        opts.causal = 1 if causal else 0
        return opts, keep

    def _output(self, out, shape):
        if out is None:
            return np.empty(shape, dtype=np.float32)
        if not isinstance(out, np.ndarray):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "out must be a numpy.ndarray, not %s"
                      % type(out).__name__)
        arr = _float_array("out", out, writable=True)
        if arr.shape != tuple(shape):
            raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                      "out has shape %s; expected %s"
                      % (_shape_text(arr.shape), _shape_text(shape)))
        return arr

    def _set_mode(self, mode, setter):
        m = _choice("mode", mode, _MODES)
        with self._lock:
            check(setter(self._handle(), m))
            self._mode = mode


class Attention(_Forward):
    """One Linformer attention layer (clf_attention) on a Context.

    Every clf_attention_desc field is a keyword: head_dim (0: d_model /
    heads), sharing ("headwise", "per-head", "key-value"), share_kv,
    one_kv_head, bias_q, bias_k, bias_v, bias_out, compressed_bias,
    bias_proj (a bias per compressed slot after E and F), slot_mask
    (linformer-pytorch's causal=True mask: leaks the future in Linformer
    mode), causal_block (0: none), precision ("float" or "half") and
    compression ("linear", "mean", "max" or "conv": docs/design.md
    section 1.1; mean and max have no E or F).  Weights start unset; set
    them by name ("W_q", "W_k", "W_v", "W_out", "b_q", "b_k", "b_v",
    "b_out", "E", "F", "b_E", "b_F") with set_weight() or all at once with
    randomize().  It cannot be copied or pickled (TypeError): keep the
    weights (numpy arrays, a safetensors file) and make another.
    """

    _copy_hint = ("make another with the same arguments and set its "
                  "weights (set_weight), or save them to a safetensors file "
                  "and use clinformer.Model.load")

    def __init__(self, ctx, d_model, heads, max_seq_len, k, *, head_dim=0,
                 sharing="headwise", share_kv=False, one_kv_head=False,
                 bias_q=False, bias_k=False, bias_v=False, bias_out=False,
                 compressed_bias=False, bias_proj=False, causal_block=0,
                 precision="float", mode="linformer", compression="linear",
                 slot_mask=False):
        self._ptr = ffi.NULL
        self._init_forward(ctx)
        desc = ffi.new("clf_attention_desc *")
        desc.d_model = _size("d_model", d_model)
        desc.heads = _size("heads", heads)
        desc.head_dim = _size("head_dim", head_dim, 0)
        desc.max_seq_len = _size("max_seq_len", max_seq_len)
        desc.k = _size("k", k)
        desc.sharing = _choice("sharing", sharing, _SHARING)
        flags = dict(share_kv=share_kv, one_kv_head=one_kv_head,
                     bias_q=bias_q, bias_k=bias_k, bias_v=bias_v,
                     bias_out=bias_out, compressed_bias=compressed_bias,
                     bias_proj=bias_proj, slot_mask=slot_mask)
        for name, value in flags.items():
            if not isinstance(value, (bool, np.bool_, int)):
                raise_for(DTypeError, "CLF_EDTYPE",
                          "%s must be a bool" % name)
            setattr(desc, name, 1 if value else 0)
        desc.causal_block = _size("causal_block", causal_block, 0)
        desc.precision = _precision(precision)
        desc.compression = _choice("compression", compression, _COMPRESSIONS)
        self._desc = desc
        self._weights = {}
        out = ffi.new("clf_attention **")

        def create(handle):
            check(lib.clf_attention_create(out, handle, desc))
            return out[0]

        ctx._create(self, create)
        self.mode = mode

    _destroy = staticmethod(lib.clf_attention_destroy)

    def __getattr__(self, name):
        # The desc's fields read back as attributes (d_model, heads, ...).
        if name in _DESC_FIELDS and "_desc" in self.__dict__:
            value = getattr(self._desc, name)
            if name == "sharing":
                return {v: k for k, v in _SHARING.items()}[value]
            if name == "precision":
                return _text(lib.clf_precision_name(value))
            if name == "compression":
                return {v: k for k, v in _COMPRESSIONS.items()}[value]
            if name in _DESC_FLAGS:
                return bool(value)
            return int(value)
        raise AttributeError(name)

    @property
    def mode(self):
        """"linformer" (compressed attention) or "full"."""
        return self._mode

    @mode.setter
    def mode(self, value):
        self._set_mode(value, lib.clf_attention_set_mode)

    @staticmethod
    def weight_names():
        return list(WEIGHT_NAMES)

    def _which(self, name):
        if not isinstance(name, str) or name not in _WEIGHT_IDS:
            raise_for(NotFoundError, "CLF_EBAD_ENUM",
                      "unknown weight name %r; the names are %s"
                      % (name, ", ".join(WEIGHT_NAMES)))
        return _WEIGHT_IDS[name]

    def weight_shape(self, name):
        """The shape weight `name` has in this layer; NotFoundError for a
        weight the configuration does not use."""
        which = self._which(name)
        count = ffi.new("size_t *")
        with self._lock:
            check(lib.clf_attention_weight_size(self._handle(), which,
                                                count))
        d = self._desc
        dh = d.head_dim or d.d_model // d.heads
        hkv = 1 if d.one_kv_head else d.heads
        ne = d.heads if d.sharing == lib.CLF_SHARE_PER_HEAD else 1
        shapes = {
            "W_q": (d.heads * dh, d.d_model),
            "W_k": (hkv * dh, d.d_model),
            "W_v": (hkv * dh, d.d_model),
            "W_out": (d.d_model, d.heads * dh),
            "b_q": (d.heads * dh,),
            "b_k": (hkv * dh,),
            "b_v": (hkv * dh,),
            "b_out": (d.d_model,),
            "E": (ne * d.k, d.max_seq_len),
            "F": (ne * d.k, d.max_seq_len),
            "b_E": (ne * d.k,),
            "b_F": (ne * d.k,),
        }
        shape = shapes[name]
        if int(np.prod(shape)) != count[0]:
            return (count[0],)
        return shape

    def set_weight(self, name, array):
        """Copies array (any real float dtype, converted to float32) into
        weight `name`; its shape must be weight_shape(name)."""
        with self._lock:
            shape = self.weight_shape(name)
            arr = np.asarray(array)
            if arr.dtype.kind != "f":
                raise_for(DTypeError, "CLF_EDTYPE",
                          "weight %s has dtype %s; a float array is required"
                          % (name, arr.dtype))
            if arr.shape != shape:
                raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                          "weight %s has shape %s; this layer needs %s"
                          % (name, _shape_text(arr.shape),
                             _shape_text(shape)))
            arr = np.array(arr, dtype=np.float32, order="C", copy=True)
            arr.setflags(write=False)
            with ffi.from_buffer("float[]", arr) as buf:
                check(lib.clf_attention_set_weight(self._handle(),
                                                   self._which(name), buf,
                                                   arr.size))
            self._weights[name] = arr

    def weight(self, name):
        """A read-only float32 copy of weight `name` as last set."""
        self._which(name)
        with self._lock:
            self._handle()
            if name not in self._weights:
                self.weight_shape(name)  # NotFoundError when unused
                raise_for(NotFoundError, "CLF_EWEIGHT_UNSET",
                          "weight %s has not been set" % name)
            return self._weights[name]

    def weights(self):
        """Every weight set so far, by name."""
        with self._lock:
            return dict(self._weights)

    def used_weights(self):
        """The names of the weights this configuration uses."""
        names = []
        count = ffi.new("size_t *")
        with self._lock:
            for name in WEIGHT_NAMES:
                rc = lib.clf_attention_weight_size(self._handle(),
                                                   _WEIGHT_IDS[name], count)
                if rc == 0:
                    names.append(name)
        return names

    def randomize(self, seed=0):
        """Sets every weight the layer uses from numpy's generator seeded
        with seed, initialised as PyTorch's nn.Linear (uniform in
        +-1/sqrt(fan_in)) and lucidrains' E and F (uniform in
        +-1/sqrt(k)).  The values are readable with weight(); they are not
        those of the C library's clf_attention_randomize."""
        rng = np.random.default_rng(seed)
        for name in self.used_weights():
            shape = self.weight_shape(name)
            if name in ("E", "F"):
                bound = 1.0 / np.sqrt(self._desc.k)
            elif name in ("W_out", "b_out"):
                bound = 1.0 / np.sqrt(self.weight_shape("W_out")[1])
            else:
                bound = 1.0 / np.sqrt(self._desc.d_model)
            self.set_weight(name, rng.uniform(-bound, bound, shape))

    @property
    def device_bytes(self):
        out = ffi.new("size_t *")
        with self._lock:
            check(lib.clf_attention_device_bytes(self._handle(), out))
        return int(out[0])

    def __call__(self, x, *, lengths=None, key_mask=None, causal=False,
                 out=None):
        """Y = attention(x) for x float32, C-contiguous, shaped (B, n, D)
        or (n, D).  Returns a new array, or `out` written in place (it may
        be x itself).  lengths (B ints, each 1..n) or key_mask ((B, n),
        nonzero = real position) mark padding, whose output rows are
        zeros; causal=True runs the causal mode (Linformer needs the
        layer's causal_block)."""
        arr = _float_array("x", x)
        D = self._desc.d_model
        if arr.ndim not in (2, 3) or arr.shape[-1] != D:
            raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                      "x has shape %s; expected (B, n, %d) or (n, %d)"
                      % (_shape_text(arr.shape), D, D))
        batched = arr.ndim == 3
        batch = arr.shape[0] if batched else 1
        n = arr.shape[-2]
        if batch == 0 or n == 0:
            raise_for(ShapeError, "CLF_EBAD_SIZE",
                      "x has shape %s: empty" % _shape_text(arr.shape))
        if n > self._desc.max_seq_len:
            raise_for(ShapeError, "CLF_ESEQ_TOO_LONG",
                      "x has %d positions; the layer's max_seq_len is %d"
                      % (n, self._desc.max_seq_len))
        opts, keep = self._opts(batch, n, batched, lengths, key_mask, causal)
        y = self._output(out, arr.shape)
        # The buffer views are released as soon as the call returns.
        with ffi.from_buffer("float[]", arr) as xin, \
                ffi.from_buffer("float[]", y, require_writable=True) as yout, \
                self._lock:
            check(lib.clf_attention_forward_ex(self._handle(), xin, batch, n,
                                               yout, opts))
        del keep
        return y

    def __repr__(self):
        d = self._desc
        return ("<clinformer.Attention d_model=%d heads=%d max_seq_len=%d "
                "k=%d%s>" % (d.d_model, d.heads, d.max_seq_len, d.k,
                             " closed" if self.closed else ""))


WEIGHT_NAMES = tuple(_text(lib.clf_weight_name(i))
                     for i in range(lib.CLF_WEIGHT_COUNT))
_WEIGHT_IDS = {name: i for i, name in enumerate(WEIGHT_NAMES)}
_DESC_FLAGS = ("share_kv", "one_kv_head", "bias_q", "bias_k", "bias_v",
               "bias_out", "compressed_bias", "bias_proj", "slot_mask")
_DESC_FIELDS = ("d_model", "heads", "head_dim", "max_seq_len", "k",
                "sharing", "causal_block", "precision",
                "compression") + _DESC_FLAGS

LAYOUTS = tuple(_text(lib.clf_layout_name(i))
                for i in range(lib.CLF_LAYOUT_SINGLE_HEAD_ATTENTION + 1))


class Model(_Forward):
    """A trained model loaded from a safetensors file (clf_model): a bare
    attention layer, an encoder or a language model, in any layout
    clf_model_load() reads (see LAYOUTS).  Create it with Model.load().
    It cannot be copied or pickled (TypeError): load the file again."""

    _kind = "model"
    _copy_hint = "load the file again with clinformer.Model.load(ctx, path)"
    _destroy = staticmethod(lib.clf_model_destroy)

    def __init__(self, *args, **kwargs):
        raise TypeError("use clinformer.Model.load(ctx, path, ...)")

    @classmethod
    def load(cls, ctx, path, layout="auto", heads=None, precision="float", *,
             causal_block=0, layerwise=False, allow_unexpected=False,
             mode=None):
        """Loads path (str or os.PathLike) onto ctx.  layout is one of
        LAYOUTS ("auto" detects it from the tensor names); heads, when the
        file's metadata lacks it; precision "float" or "half" for the
        attention weights; mode "linformer" or "full" for every layer
        (None: the file's, full for a linformer-pytorch model saved with
        full_attention=True, else linformer)."""
        import os

        self = cls.__new__(cls)
        self._ptr = ffi.NULL
        self._init_forward(ctx)
        try:
            fspath = os.fsencode(path)
        except TypeError:
            raise_for(DTypeError, "CLF_EDTYPE",
                      "path must be a str or os.PathLike, not %s"
                      % type(path).__name__)
        _cstr("path", fspath)
        opts = ffi.new("clf_model_opts *")
        if not isinstance(layout, str):
            raise_for(InvalidArgumentError, "CLF_EBAD_ENUM",
                      "layout must be a string, one of %s"
                      % ", ".join(LAYOUTS))
        lay = ffi.new("clf_layout *")
        check(lib.clf_layout_parse(_cstr("layout", layout.encode()), lay))
        opts.layout = lay[0]
        opts.heads = 0 if heads is None else _size("heads", heads)
        opts.causal_block = _size("causal_block", causal_block, 0)
        opts.layerwise = 1 if layerwise else 0
        opts.allow_unexpected = 1 if allow_unexpected else 0
        opts.precision = _precision(precision)
        out = ffi.new("clf_model **")

        def create(handle):
            check(lib.clf_model_load(out, handle, fspath, opts))
            return out[0]

        ctx._create(self, create)
        info = ffi.new("clf_model_info *")
        check(lib.clf_model_info_get(self._ptr, info))
        i = info[0]
        self.info = ModelInfo(
            layout=_text(lib.clf_layout_name(i.layout)), d_model=i.d_model,
            heads=i.heads, head_dim=i.head_dim, max_seq_len=i.max_seq_len,
            k=i.k, layers=i.layers, ffn_dim=i.ffn_dim, vocab=i.vocab,
            reversible=bool(i.reversible), share_kv=bool(i.share_kv),
            one_kv_head=bool(i.one_kv_head), layerwise=bool(i.layerwise),
            slot_mask=bool(i.slot_mask))
        self.unexpected = [
            _text(lib.clf_model_unexpected_name(self._ptr, j))
            for j in range(lib.clf_model_unexpected_count(self._ptr))]
        if mode is None:  # the file's (full_attention=True: "full")
            m = ffi.new("clf_mode *")
            check(lib.clf_model_get_mode(self._ptr, m))
            self._mode = {v: k for k, v in _MODES.items()}[m[0]]
        else:
            self.mode = mode
        if self.info.slot_mask and self._mode == "linformer":
            import warnings
            warnings.warn(
                "%s was trained with causal=True: its mask over the "
                "compressed slots is applied as trained, but each slot "
                "mixes every position, so the output at t depends on "
                "positions after t (the prefix-safe causal mode does not)"
                % os.fsdecode(fspath), FutureLeakWarning, stacklevel=2)
        return self

    @property
    def mode(self):
        """"linformer" or "full", for every layer."""
        return self._mode

    @mode.setter
    def mode(self, value):
        self._set_mode(value, lib.clf_model_set_mode)

    @property
    def is_lm(self):
        return self.info.vocab != 0

    def _tokens(self, ids):
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iu":
            raise_for(DTypeError, "CLF_EDTYPE",
                      "ids has dtype %s; a language model takes integer "
                      "token ids" % arr.dtype)
        if arr.ndim not in (1, 2):
            raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                      "ids has shape %s; expected (B, n) or (n,)"
                      % _shape_text(arr.shape))
        bad = (arr < 0) | (arr >= self.info.vocab)
        if bad.any():
            idx = np.unravel_index(int(np.argmax(bad)), arr.shape)
            raise_for(ShapeError, "CLF_EBAD_SIZE",
                      "ids%s = %d is outside the vocabulary 0..%d"
                      % ([int(i) for i in idx], int(arr[idx]),
                         self.info.vocab - 1))
        return np.ascontiguousarray(arr, dtype=np.int64)

    def __call__(self, x, *, lengths=None, key_mask=None, causal=False,
                 out=None):
        """The model's output for x: float32 (B, n, D) or (n, D) rows, or
        for a language model integer token ids (B, n) or (n,), giving
        logits (..., vocab).  Options and out= as Attention.__call__."""
        info = self.info
        if self.is_lm:
            arr = self._tokens(x)
            batched = arr.ndim == 2
            cols = info.vocab
        else:
            arr = _float_array("x", x)
            if arr.ndim not in (2, 3) or arr.shape[-1] != info.d_model:
                raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                          "x has shape %s; expected (B, n, %d) or (n, %d)"
                          % (_shape_text(arr.shape), info.d_model,
                             info.d_model))
            batched = arr.ndim == 3
            cols = info.d_model
        batch = arr.shape[0] if batched else 1
        n = arr.shape[1] if batched else arr.shape[0]
        if batch == 0 or n == 0:
            raise_for(ShapeError, "CLF_EBAD_SIZE",
                      "x has shape %s: empty" % _shape_text(arr.shape))
        if n > info.max_seq_len:
            raise_for(ShapeError, "CLF_ESEQ_TOO_LONG",
                      "x has %d positions; the model's max_seq_len is %d"
                      % (n, info.max_seq_len))
        opts, keep = self._opts(batch, n, batched, lengths, key_mask, causal)
        shape = (batch, n, cols) if batched else (n, cols)
        y = self._output(out, shape)
        with ffi.from_buffer(arr) as xbuf, \
                ffi.from_buffer("float[]", y, require_writable=True) as yout, \
                self._lock:
            h = self._handle()
            if self.is_lm:
                ids = ffi.cast("const long long *", xbuf)
                check(lib.clf_model_forward_tokens(h, ids, batch, n, yout,
                                                   opts))
            else:
                xin = ffi.cast("const float *", xbuf)
                check(lib.clf_model_forward(h, xin, batch, n, yout, opts))
        del keep
        return y

    def __repr__(self):
        return "<clinformer.Model %s, %d layer(s)%s>" % (
            self.info.layout, self.info.layers,
            " closed" if self.closed else "")


class Stream(_OwnsHandle):
    """Positions appended a few at a time to a causal layer or model
    (clf_stream): each append returns the outputs of the new positions,
    equal to the whole-sequence causal forward's there.  Made by
    Model.stream() or Attention.stream(); closed with its layer or model.
    Its state (the compressed slots of finished blocks, the open block's
    rows) does not grow with the stream in Linformer mode; a stream ends
    at max_seq_len (reset() starts again).  It cannot be copied or
    pickled (TypeError): make another with .stream()."""

    _copy_hint = "make another with Model.stream() or Attention.stream()"

    def __init__(self, owner, batch):
        if not isinstance(owner, _Forward):
            raise_for(DTypeError, "CLF_EDTYPE",
                      "a stream runs on a clinformer.Model or Attention, "
                      "not %s" % type(owner).__name__)
        self._owner = owner
        self._ptr = ffi.NULL
        self._batch = _size("batch", batch)
        out = ffi.new("clf_stream **")
        create = (lib.clf_stream_create if isinstance(owner, Model)
                  else lib.clf_stream_create_attention)
        with owner._lock:
            check(create(out, owner._handle(), self._batch))
            self._ptr = out[0]
            owner._streams.add(self)
        info = self._info()
        self._w_in, self._w_out = info.width_in, info.width_out

    def _handle(self):
        if self._ptr == ffi.NULL:
            raise_for(ClosedError, "CLF_EINVALID_ARGUMENT",
                      "the stream is closed")
        return self._ptr

    def _info(self):
        out = ffi.new("clf_stream_info *")
        with self._owner._lock:
            check(lib.clf_stream_info_get(self._handle(), out))
        return out[0]

    @property
    def closed(self):
        return self._ptr == ffi.NULL

    def close(self):
        """Releases the stream's state.  Idempotent."""
        with self._owner._lock:
            if self._ptr != ffi.NULL:
                lib.clf_stream_destroy(self._ptr)
                self._ptr = ffi.NULL

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_ptr", ffi.NULL) != ffi.NULL:
                self.close()
        except Exception:
            pass

    @property
    def position(self):
        """Positions appended so far."""
        return int(self._info().position)

    @property
    def state_bytes(self):
        """Host memory of the stream's state (clf_stream_info)."""
        return int(self._info().state_bytes)

    def reset(self):
        """Back to position 0."""
        with self._owner._lock:
            check(lib.clf_stream_reset(self._handle()))

    def _input(self, x):
        B = self._batch
        if self._w_in == 0:
            arr = self._owner._tokens(x)
            if arr.ndim == 1 and B == 1:
                arr = arr.reshape(1, -1)
            want = "(%d, m) token ids" % B
            ok = arr.ndim == 2 and arr.shape[0] == B
        else:
            # a chunk is usually a slice along the positions: copied
            arr = _float_array("x", np.ascontiguousarray(x))
            if arr.ndim == 2 and B == 1:
                arr = arr.reshape(1, *arr.shape)
            want = "(%d, m, %d)" % (B, self._w_in)
            ok = (arr.ndim == 3 and arr.shape[0] == B
                  and arr.shape[2] == self._w_in)
        if not ok:
            raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                      "x has shape %s; this stream of %d sequence%s takes %s"
                      % (_shape_text(np.shape(x)), B,
                         "" if B == 1 else "s", want))
        if arr.shape[1] == 0:
            raise_for(ShapeError, "CLF_EBAD_SIZE", "x holds no positions")
        return np.ascontiguousarray(arr)

    def append(self, x, *, key_mask=None):
        """The outputs (B, m, D), or logits (B, m, vocab), of the m
        positions of x: float32 (B, m, D) rows, or an LM's integer token
        ids (B, m) ((m, D) and (m,) when the batch is 1).  key_mask
        (B, m), nonzero = real position, marks padding."""
        arr = self._input(x)
        B, m = arr.shape[0], arr.shape[1]
        mk = ffi.NULL
        keep = None
        if key_mask is not None:
            km = np.asarray(key_mask)
            if km.ndim == 1 and B == 1:
                km = km.reshape(1, -1)
            if km.shape != (B, m):
                raise_for(ShapeError, "CLF_ESHAPE_MISMATCH",
                          "key_mask has shape %s; expected (%d, %d)"
                          % (_shape_text(np.shape(key_mask)), B, m))
            keep = np.ascontiguousarray(km != 0, dtype=np.uint8)
            mk = ffi.cast("const unsigned char *", ffi.from_buffer(keep))
        y = np.empty((B, m, self._w_out), dtype=np.float32)
        with ffi.from_buffer(arr) as xbuf, \
                ffi.from_buffer("float[]", y, require_writable=True) as yout, \
                self._owner._lock:
            h = self._handle()
            self._owner._handle()
            if self._w_in == 0:
                check(lib.clf_stream_append_tokens(
                    h, ffi.cast("const long long *", xbuf), B, m, mk, yout))
            else:
                check(lib.clf_stream_append(
                    h, ffi.cast("const float *", xbuf), B, m, mk, yout))
        del keep
        return y

    def __repr__(self):
        if self.closed:
            return "<clinformer.Stream closed>"
        return "<clinformer.Stream batch=%d position=%d>" % (
            self._batch, self.position)
