"""Exceptions: one class per kind of failure, each also deriving from the
built-in exception a Python caller would catch for it."""

from ._clinformer import ffi, lib


class ClinformerError(Exception):
    """A clinformer failure.

    ``status`` is the library's status code (negative), ``name`` its
    symbolic name (``"CLF_EBAD_SIZE"``, ``"CL_OUT_OF_RESOURCES"``) and
    ``message`` the sentence naming what failed.
    """

    def __init__(self, status, message=None):
        status = int(status)
        if message is None:
            message = _text(lib.clf_strerror(status))
        self.status = status
        self.name = status_name(status)
        self.message = message
        super().__init__("%s: %s" % (self.name, message))

    def __str__(self):
        return "%s: %s" % (self.name, self.message)

    def __reduce__(self):
        return (type(self), (self.status, self.message))


class InvalidArgumentError(ClinformerError, ValueError):
    """An argument is out of range or inconsistent with the layer."""


class ShapeError(InvalidArgumentError):
    """A size or shape is zero, too large or disagrees with the layer."""


class DTypeError(ClinformerError, TypeError):
    """An array or tensor has a data type the library does not take."""


class NotFoundError(ClinformerError, LookupError):
    """No tensor, weight or entry of that name."""


class DeviceNotFoundError(NotFoundError):
    """No OpenCL device, or none that matches the selector."""


class WeightUnsetError(ClinformerError, RuntimeError):
    """A forward needs a weight that has not been set."""


class ClosedError(ClinformerError, ValueError):
    """The context or layer has been closed."""


class FileError(ClinformerError, OSError):
    """A file could not be read or written."""


class FormatError(ClinformerError, ValueError):
    """A file is malformed."""


class OutOfMemoryError(ClinformerError, MemoryError):
    """Host or device memory ran out, or a buffer is too large."""


class UnsupportedError(ClinformerError, RuntimeError):
    """The device, queue or build lacks a feature."""


class DeviceError(ClinformerError, RuntimeError):
    """An OpenCL or CLBlast failure, or an aborted sharded forward."""


_BY_NAME = {
    "CLF_EINVALID_ARGUMENT": InvalidArgumentError,
    "CLF_ENULL_ARGUMENT": InvalidArgumentError,
    "CLF_EBAD_SIZE": ShapeError,
    "CLF_ESIZE_OVERFLOW": ShapeError,
    "CLF_ESEQ_TOO_LONG": ShapeError,
    "CLF_EK_TOO_LARGE": ShapeError,
    "CLF_ESHAPE_MISMATCH": ShapeError,
    "CLF_EBUFFER_TOO_SMALL": ShapeError,
    "CLF_EBAD_ENUM": InvalidArgumentError,
    "CLF_EWRONG_CONTEXT": InvalidArgumentError,
    "CLF_EWEIGHT_UNSET": WeightUnsetError,
    "CLF_EWEIGHT_UNUSED": NotFoundError,
    "CLF_ENOT_FOUND": NotFoundError,
    "CLF_ENO_DEVICE": DeviceNotFoundError,
    "CLF_EDEVICE_NOT_FOUND": DeviceNotFoundError,
    "CLF_ENO_MEMORY": OutOfMemoryError,
    "CLF_ETOO_LARGE": OutOfMemoryError,
    "CLF_EUNSUPPORTED": UnsupportedError,
    "CLF_EIO": FileError,
    "CLF_EFORMAT": FormatError,
    "CLF_EDTYPE": DTypeError,
    "CLF_ESHARD_ABORTED": DeviceError,
    "CLF_EOUT_OF_BOUNDS": DeviceError,
    "CL_OUT_OF_HOST_MEMORY": OutOfMemoryError,
    "CL_MEM_OBJECT_ALLOCATION_FAILURE": OutOfMemoryError,
}


def _text(cstr):
    return ffi.string(cstr).decode("utf-8", "replace")


def status_name(status):
    """The symbolic name of a status code."""
    return _text(lib.clf_status_name(int(status)))


def strerror(status):
    """The library's static sentence for a status code."""
    return _text(lib.clf_strerror(int(status)))


def error_class(status):
    """The exception class for a status code."""
    return _BY_NAME.get(status_name(status), DeviceError)


def check(status):
    """Raises the exception for a failed call's status; must run on the
    thread that made the call (the library's message is per thread)."""
    if status == 0:
        return
    message = _text(lib.clf_error_message(status))
    raise error_class(status)(status, message)


def raise_for(cls, name, message):
    """Raises cls for a failure found before calling the library, carrying
    the status ("CLF_EBAD_SIZE") the library would have returned."""
    raise cls(getattr(lib, name), message)


class FutureLeakWarning(UserWarning):
    """A model runs as trained, but its output at a position depends on
    later positions: a linformer-pytorch model trained with causal=True,
    whose mask over the compressed slots does not stop the future (each
    slot mixes every position).  For causal use, the prefix-safe causal
    mode (causal_block) is the one."""
