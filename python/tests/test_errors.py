import builtins
import pickle

import numpy as np
import pytest

import clinformer
from clinformer import (
    ClinformerError,
    ClosedError,
    DeviceNotFoundError,
    DTypeError,
    FileError,
    FormatError,
    InvalidArgumentError,
    NotFoundError,
    ShapeError,
    UnsupportedError,
    WeightUnsetError,
)
from conftest import DATA


def layer(ctx, **kw):
    desc = dict(d_model=16, heads=2, max_seq_len=12, k=4)
    desc.update(kw)
    att = clinformer.Attention(ctx, **desc)
    att.randomize(3)
    return att


@pytest.fixture
def att(ctx):
    a = layer(ctx)
    yield a
    a.close()


X = np.zeros((2, 10, 16), dtype=np.float32) + 0.5


@pytest.mark.parametrize("cls, bases", [
    (InvalidArgumentError, (ValueError,)),
    (ShapeError, (ValueError, InvalidArgumentError)),
    (DTypeError, (TypeError,)),
    (NotFoundError, (LookupError,)),
    (DeviceNotFoundError, (LookupError, NotFoundError)),
    (FileError, (OSError,)),
    (FormatError, (ValueError,)),
    (ClosedError, (ValueError,)),
    (WeightUnsetError, (RuntimeError,)),
    (UnsupportedError, (RuntimeError,)),
    (clinformer.OutOfMemoryError, (MemoryError,)),
    (clinformer.DeviceError, (RuntimeError,)),
])
def test_error_classes_derive_from_builtins(cls, bases):
    assert issubclass(cls, ClinformerError)
    for b in bases:
        assert issubclass(cls, b)
    e = cls(-4002, "something named")
    assert e.status == -4002 and e.name == "CLF_EBAD_SIZE"
    assert str(e) == "CLF_EBAD_SIZE: something named"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.message == "something named"


def test_error_status_names_from_library():
    assert clinformer.status_name(-4019) == "CLF_ENOT_FOUND"
    assert clinformer.status_name(-5) == "CL_OUT_OF_RESOURCES"
    assert "no tensor" in clinformer.strerror(-4019)


def test_error_unknown_device_selector():
    with pytest.raises(DeviceNotFoundError) as e:
        clinformer.Context("no-such-device-anywhere")
    assert e.value.name == "CLF_EDEVICE_NOT_FOUND"
    assert "no-such-device-anywhere" in e.value.message


def test_error_selector_not_a_string():
    with pytest.raises(TypeError, match="selector"):
        clinformer.Context(0)


def test_error_x_wrong_dtype(att):
    with pytest.raises(DTypeError, match="x has dtype float64") as e:
        att(X.astype(np.float64))
    assert e.value.name == "CLF_EDTYPE"
    with pytest.raises(TypeError, match="x has dtype int32"):
        att(X.astype(np.int32))


def test_error_x_wrong_shape(att):
    with pytest.raises(ShapeError, match=r"x has shape \(2, 10, 8\)"):
        att(np.zeros((2, 10, 8), np.float32))
    with pytest.raises(ValueError, match=r"x has shape \(16,\)"):
        att(np.zeros(16, np.float32))
    with pytest.raises(ShapeError, match="empty"):
        att(np.zeros((0, 10, 16), np.float32))
    with pytest.raises(ShapeError, match="max_seq_len is 12") as e:
        att(np.zeros((1, 13, 16), np.float32))
    assert e.value.name == "CLF_ESEQ_TOO_LONG"


def test_error_x_not_contiguous(att):
    big = np.zeros((2, 10, 32), np.float32)
    with pytest.raises(ValueError, match="x is not C-contiguous"):
        att(big[:, :, ::2])
    with pytest.raises(ValueError, match="x is not C-contiguous"):
        att(np.asfortranarray(np.zeros((10, 16), np.float32)))


def test_error_x_not_an_array(att):
    with pytest.raises(TypeError, match="x has dtype"):
        att("hello")
    with pytest.raises(TypeError, match="x"):
        att(object())


def test_error_out_checked(att):
    with pytest.raises(ShapeError, match=r"out has shape \(2, 10, 15\)"):
        att(X, out=np.zeros((2, 10, 15), np.float32))
    with pytest.raises(DTypeError, match="out has dtype float64"):
        att(X, out=np.zeros((2, 10, 16)))
    ro = np.zeros((2, 10, 16), np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="out is read-only"):
        att(X, out=ro)
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        att(X, out=[0.0])
    with pytest.raises(ValueError, match="out is not C-contiguous"):
        att(X, out=np.zeros((2, 10, 32), np.float32)[:, :, ::2])


def test_error_lengths_out_of_range(att):
    with pytest.raises(ShapeError, match=r"lengths\[1\] = 11 is out of "
                       r"range 1\.\.10"):
        att(X, lengths=[10, 11])
    with pytest.raises(ShapeError, match=r"lengths\[0\] = 0"):
        att(X, lengths=[0, 5])
    with pytest.raises(ShapeError, match=r"lengths\[1\] = -1"):
        att(X, lengths=[3, -1])
    with pytest.raises(ShapeError, match="the input has 2 sequences"):
        att(X, lengths=[3])
    with pytest.raises(DTypeError, match="lengths must be integers"):
        att(X, lengths=[3.0, 4.0])


def test_error_key_mask_checked(att):
    with pytest.raises(ShapeError, match=r"key_mask has shape \(2, 9\)"):
        att(X, key_mask=np.ones((2, 9), bool))
    with pytest.raises(InvalidArgumentError, match="not both"):
        att(X, lengths=[1, 2], key_mask=np.ones((2, 10), bool))
    with pytest.raises(DTypeError, match="key_mask"):
        att(X, key_mask=np.full((2, 10), "a"))


def test_error_causal_linformer_needs_block(att):
    with pytest.raises(ShapeError) as e:
        att(X, causal=True)
    assert e.value.name == "CLF_EBAD_SIZE"
    assert "causal_block" in e.value.message
    with pytest.raises(TypeError, match="causal must be a bool"):
        att(X, causal="yes")


def test_error_unknown_weight_name(att):
    with pytest.raises(NotFoundError, match="unknown weight name 'W_z'"):
        att.set_weight("W_z", np.zeros((16, 16)))
    with pytest.raises(LookupError, match="unknown weight name"):
        att.weight("q")
    with pytest.raises(LookupError, match="unknown weight name"):
        att.weight(3)


def test_error_weight_unused_unset_misshapen(ctx):
    att = clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12,
                               k=4, share_kv=True)
    with pytest.raises(NotFoundError) as e:
        att.set_weight("W_v", np.zeros((16, 16)))
    assert e.value.name == "CLF_EWEIGHT_UNUSED"
    with pytest.raises(NotFoundError) as e:
        att.weight("b_q")
    assert e.value.name == "CLF_EWEIGHT_UNUSED"
    with pytest.raises(NotFoundError, match="W_q has not been set"):
        att.weight("W_q")
    with pytest.raises(WeightUnsetError) as e:
        att(X)
    assert e.value.name == "CLF_EWEIGHT_UNSET"
    with pytest.raises(ShapeError, match=r"weight W_q has shape \(16, 8\); "
                       r"this layer needs \(16, 16\)"):
        att.set_weight("W_q", np.zeros((16, 8)))
    with pytest.raises(DTypeError, match="weight W_q has dtype int64"):
        att.set_weight("W_q", np.zeros((16, 16), np.int64))


def test_error_half_weight_out_of_range(ctx):
    att = layer(ctx, precision="half")
    with pytest.raises(InvalidArgumentError) as e:
        att.set_weight("W_q", np.full((16, 16), 1e6))
    assert e.value.name == "CLF_EINVALID_ARGUMENT"
    assert "65504" in e.value.message or "W_q" in e.value.message


def test_error_bad_layer_shapes(ctx):
    with pytest.raises(ShapeError) as e:
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=13)
    assert e.value.name == "CLF_EK_TOO_LARGE"
    with pytest.raises(ShapeError) as e:
        clinformer.Attention(ctx, d_model=15, heads=2, max_seq_len=12, k=4)
    assert e.value.name == "CLF_ESHAPE_MISMATCH"
    with pytest.raises(ShapeError, match="d_model 0 is out of range"):
        clinformer.Attention(ctx, d_model=0, heads=2, max_seq_len=12, k=4)
    with pytest.raises(ShapeError, match="k -1 is out of range"):
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=-1)
    with pytest.raises(TypeError, match="heads must be an int, not float"):
        clinformer.Attention(ctx, d_model=16, heads=2.0, max_seq_len=12, k=4)
    with pytest.raises(ValueError, match="sharing 'diagonal' is not one of"):
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=4,
                             sharing="diagonal")
    with pytest.raises(ValueError) as e:
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=4,
                             precision="double")
    assert e.value.name == "CLF_EBAD_ENUM" and "double" in e.value.message
    with pytest.raises(TypeError):
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=4,
                             no_such_option=1)
    with pytest.raises(TypeError, match="ctx must be a clinformer.Context"):
        clinformer.Attention(None, d_model=16, heads=2, max_seq_len=12, k=4)


def test_error_bad_mode(att):
    with pytest.raises(ValueError, match="mode 'sparse' is not one of"):
        att.mode = "sparse"
    assert att.mode == "linformer"


def test_error_closed_context_and_layer(att):
    ctx = clinformer.Context()
    a = layer(ctx)
    a(X)
    ctx.close()
    ctx.close()  # idempotent
    assert ctx.closed and a.closed
    with pytest.raises(ClosedError, match="the layer is closed"):
        a(X)
    with pytest.raises(ClosedError, match="the context is closed"):
        ctx.device
    with pytest.raises(ValueError, match="the context is closed"):
        clinformer.Attention(ctx, d_model=16, heads=2, max_seq_len=12, k=4)
    with pytest.raises(ClosedError, match="the context is closed"):
        clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors")
    a.close()
    with pytest.raises(ClosedError):
        a.set_weight("W_q", np.zeros((16, 16)))


def test_error_context_manager_closes(ctx):
    with clinformer.Context() as c:
        with layer(c) as a:
            assert a(X).shape == X.shape
        assert a.closed and not c.closed
    assert c.closed


def test_error_nul_in_names_is_refused(ctx):
    # Cut at the NUL, these named another file and another device.
    path = str(DATA / "lucidrains_encoder.safetensors")
    with pytest.raises(InvalidArgumentError, match="path holds a NUL"):
        clinformer.Model.load(ctx, path + "\x00junk")
    with pytest.raises(InvalidArgumentError, match="selector holds a NUL"):
        clinformer.Context("pocl:0\x00x")
    with pytest.raises(InvalidArgumentError, match="layout holds a NUL"):
        clinformer.Model.load(ctx, path, layout="auto\x00x")


def test_error_model_missing_file(ctx, tmp_path):
    with pytest.raises(FileError) as e:
        clinformer.Model.load(ctx, tmp_path / "none.safetensors")
    assert isinstance(e.value, OSError)
    assert e.value.name == "CLF_EIO" and "none.safetensors" in e.value.message


def test_error_model_malformed_file(ctx, tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(FormatError) as e:
        clinformer.Model.load(ctx, p)
    assert e.value.name == "CLF_EFORMAT"


def test_error_model_wrong_layout_and_heads(ctx):
    path = DATA / "lucidrains_encoder.safetensors"
    with pytest.raises(NotFoundError) as e:
        clinformer.Model.load(ctx, path, layout="fairseq-attention")
    assert e.value.name == "CLF_ENOT_FOUND"
    with pytest.raises(ValueError) as e:
        clinformer.Model.load(ctx, path, layout="keras")
    assert e.value.name == "CLF_EBAD_ENUM"
    with pytest.raises(InvalidArgumentError):
        clinformer.Model.load(ctx, path, heads=3)
    with pytest.raises(TypeError, match="path must be a str"):
        clinformer.Model.load(ctx, 42)


def test_error_model_bad_inputs(ctx):
    m = clinformer.Model.load(ctx, DATA / "lucidrains_encoder.safetensors")
    with pytest.raises(ShapeError, match=r"expected \(B, n, 16\)"):
        m(np.zeros((2, 10, 8), np.float32))
    with pytest.raises(DTypeError, match="x has dtype int64"):
        m(np.zeros((2, 10, 16), np.int64))
    lm = clinformer.Model.load(ctx, DATA / "lucidrains_lm.safetensors")
    with pytest.raises(DTypeError, match="integer token ids"):
        lm(np.zeros((2, 10), np.float32))
    with pytest.raises(ShapeError, match=r"ids\[1, 3\] = 20 is outside "
                       r"the vocabulary 0\.\.19"):
        ids = np.zeros((2, 10), np.int64)
        ids[1, 3] = 20
        lm(ids)
    with pytest.raises(ShapeError, match=r"lengths\[0\] = 11"):
        lm(np.zeros((2, 10), np.int64), lengths=[11, 2])
    with pytest.raises(TypeError, match="Model.load"):
        clinformer.Model()


def test_error_builtin_names_exported():
    for name in clinformer.__all__:
        assert hasattr(clinformer, name)
    assert not hasattr(builtins, "ClinformerError")


def test_error_unsupported_causal_compressed_bias(ctx):
    att = layer(ctx, compressed_bias=True, bias_k=True, causal_block=3)
    with pytest.raises(UnsupportedError) as e:
        att(np.zeros((1, 12, 16), np.float32), causal=True)
    assert e.value.name == "CLF_EUNSUPPORTED"
    assert "compressed_bias" in e.value.message


def test_error_too_large_for_device(ctx):
    with pytest.raises(MemoryError) as e:
        clinformer.Attention(ctx, d_model=4096, heads=2, max_seq_len=1 << 24,
                             k=1 << 20)
    assert isinstance(e.value, clinformer.OutOfMemoryError)
    assert e.value.name == "CLF_ETOO_LARGE" and "E" in e.value.message
