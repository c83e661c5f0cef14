import re
import threading

import numpy as np
import pytest

import clinformer
from conftest import DATA
from reference import attention as ref_attention
from reference import close

DESC = dict(d_model=32, heads=4, max_seq_len=24, k=8)


def test_devices_lists_stable_names():
    devs = clinformer.devices()
    assert devs, "no OpenCL device"
    for d in devs:
        assert ":" in d.stable_name and d.type in ("gpu", "cpu", "other")
        assert d.memory > 0 and d.name
    assert [d.index for d in devs] == list(range(len(devs)))


def test_context_selects_by_stable_name(ctx):
    name = ctx.device.stable_name
    with clinformer.Context(name) as c:
        assert c.device.stable_name == name
        assert name in repr(c)


def test_threads_share_one_context(ctx, rng):
    # Each thread its own layer on the shared context; every result equals
    # the single-threaded one, bit for bit (one in-order queue).
    layers, inputs, want = [], [], []
    for t in range(4):
        att = clinformer.Attention(ctx, **DESC)
        att.randomize(t)
        x = rng.standard_normal((2, 20, 32)).astype(np.float32)
        layers.append(att)
        inputs.append(x)
        want.append(att(x))
    got = [None] * 4
    errors = []

    def work(t):
        try:
            for _ in range(20):
                y = layers[t](inputs[t])
                if not np.array_equal(y, want[t]):
                    raise AssertionError("thread %d: output moved" % t)
            got[t] = y
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(4):
        assert close(got[t], ref_attention(inputs[t], layers[t].weights(),
                                           **DESC))


def test_threads_one_layer_serialised(ctx, rng):
    # Two threads on one layer: the layer's lock makes them take turns,
    # so every output is still right.
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(9)
    xs = [rng.standard_normal((1, 24, 32)).astype(np.float32)
          for _ in range(2)]
    want = [att(x) for x in xs]
    bad = []

    def work(t):
        for _ in range(25):
            if not np.array_equal(att(xs[t]), want[t]):
                bad.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad


def test_threads_close_context_while_others_wait(rng):
    ctx = clinformer.Context()
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(1)
    x = rng.standard_normal((1, 24, 32)).astype(np.float32)
    outcomes = []

    def work():
        for _ in range(50):
            try:
                att(x)
            except clinformer.ClosedError:
                outcomes.append("closed")
                return
        outcomes.append("done")

    th = threading.Thread(target=work)
    th.start()
    ctx.close()
    th.join()
    assert outcomes in (["closed"], ["done"])
    assert att.closed


def test_buffer_out_written_in_place(ctx, rng):
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(2)
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    out = np.full_like(x, np.nan)
    ptr = out.__array_interface__["data"][0]
    y = att(x, out=out)
    assert y is out
    assert out.__array_interface__["data"][0] == ptr
    assert not np.isnan(out).any()
    assert close(out, ref_attention(x, att.weights(), **DESC))


def test_buffer_input_not_copied(ctx, rng):
    # x and out may be the same array: the forward reads x straight from
    # the caller's memory and writes the result over it.
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(4)
    x = rng.standard_normal((2, 20, 32)).astype(np.float32)
    want = att(x)
    buf = x.copy()
    ptr = buf.__array_interface__["data"][0]
    y = att(buf, out=buf)
    assert y is buf and buf.__array_interface__["data"][0] == ptr
    assert np.array_equal(buf, want)


def test_buffer_protocol_objects(ctx, rng):
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(5)
    x = rng.standard_normal((20, 32)).astype(np.float32)
    want = att(x)
    assert np.array_equal(att(memoryview(x)), want)
    ro = x.copy()
    ro.setflags(write=False)
    assert np.array_equal(att(ro), want)
    # A C-contiguous view into a larger array is used as it is.
    big = np.zeros((3, 20, 32), np.float32)
    big[1] = x
    assert np.array_equal(att(big[1]), want)


def test_layer_keeps_its_context_alive(rng):
    import gc
    import weakref

    ctx = clinformer.Context()
    ref = weakref.ref(ctx)
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(6)
    del ctx
    gc.collect()
    assert ref() is not None and att.context is ref()
    x = rng.standard_normal((1, 10, 32)).astype(np.float32)
    assert close(att(x), ref_attention(x, att.weights(), **DESC))
    del att
    gc.collect()
    assert ref() is None  # the last layer gone, the context goes too


def test_context_calls(ctx, rng):
    ctx.build()
    att = clinformer.Attention(ctx, **DESC)
    att.randomize(7)
    att(rng.standard_normal((1, 24, 32)).astype(np.float32))
    ctx.finish()
    assert ctx.build_log == ""
    assert "gemm" in ctx.kernel_choices
    assert isinstance(ctx.warnings, str)
    assert att.device_bytes > (32 * 32 * 4 + 8 * 24 * 2) * 4
    assert clinformer.version() == clinformer.__version__


def test_threads_create_while_closing(rng):
    # Layers made in one thread while another closes the context: each
    # creation either succeeds (and is closed with the context) or raises
    # ClosedError; nothing is made on a destroyed context.
    for _ in range(5):
        ctx = clinformer.Context()
        made, errors = [], []

        def work():
            for _ in range(20):
                try:
                    made.append(clinformer.Attention(ctx, **DESC))
                except clinformer.ClosedError:
                    return
                except Exception as e:
                    errors.append(e)
                    return

        th = threading.Thread(target=work)
        th.start()
        ctx.close()
        th.join()
        assert not errors, errors
        assert all(a.closed for a in made)


def test_handles_are_never_shared_by_a_copy(ctx, rng, tmp_path):
    # A copy sharing the C handle would free it when collected, under the
    # original: copy, deepcopy and pickle raise TypeError naming the way
    # out, and the original keeps working.
    import copy
    import gc
    import pickle

    layer = clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12,
                                 k=4)
    layer.randomize(seed=3)
    model = clinformer.Model.load(ctx, DATA / "lucidrains_attention.safetensors",
                                  heads=2)
    x = rng.standard_normal((1, 12, 16)).astype(np.float32)
    want_layer, want_model = layer(x), model(x)
    cases = [(ctx, "Context(selector)"), (layer, "set_weight"),
             (model, "Model.load")]
    for obj, hint in cases:
        name = type(obj).__name__
        for how, what in ((copy.copy, "copied"), (copy.deepcopy, "copied"),
                          (pickle.dumps, "pickled")):
            with pytest.raises(TypeError,
                               match="clinformer.%s cannot be %s.*%s"
                               % (name, what, re.escape(hint))):
                how(obj)
    gc.collect()
    assert np.array_equal(layer(x), want_layer)
    assert np.array_equal(model(x), want_model)
    model.close()
    layer.close()
