"""clinformer: Linformer attention on any OpenCL device, from numpy.

    import numpy as np, clinformer
    with clinformer.Context("cpu") as ctx:
        att = clinformer.Attention(ctx, d_model=64, heads=4, max_seq_len=128, k=32)
        att.randomize(seed=1)
        y = att(np.random.rand(2, 100, 64).astype(np.float32))

Errors raise ClinformerError subclasses that also derive from the matching
built-in exception (ValueError, TypeError, LookupError, OSError, ...).
"""

from ._core import (
    LAYOUTS,
    WEIGHT_NAMES,
    Attention,
    Context,
    Device,
    Model,
    ModelInfo,
    Stream,
    devices,
    version,
)
from ._errors import (
    ClinformerError,
    ClosedError,
    DeviceError,
    DeviceNotFoundError,
    DTypeError,
    FileError,
    FormatError,
    FutureLeakWarning,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    ShapeError,
    UnsupportedError,
    WeightUnsetError,
    status_name,
    strerror,
)

__version__ = "0.1.0"

__all__ = [
    "LAYOUTS", "WEIGHT_NAMES", "Attention", "Context", "Device", "Model",
    "ModelInfo", "Stream", "devices", "version", "ClinformerError",
    "ClosedError", "DeviceError", "DeviceNotFoundError", "DTypeError",
    "FileError", "FormatError", "FutureLeakWarning", "InvalidArgumentError",
    "NotFoundError", "OutOfMemoryError", "ShapeError", "UnsupportedError",
    "WeightUnsetError", "status_name", "strerror",
]
