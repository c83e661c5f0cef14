import os
from pathlib import Path

import numpy as np
import pytest

import clinformer

DATA = Path(os.environ.get(
    "CLINFORMER_TEST_DATA",
    Path(__file__).resolve().parent.parent.parent / "tests" / "data"))


@pytest.fixture(scope="session")
def ctx():
    # A device is required, not optional: a suite that skipped every
    # forward would pass without testing anything.
    if not clinformer.devices():
        pytest.fail("no OpenCL device: install an OpenCL driver "
                    "(Debian: pocl-opencl-icd)")
    c = clinformer.Context(os.environ.get("CLINFORMER_DEVICE"))
    yield c
    c.close()


@pytest.fixture
def rng(request):
    # A fixed seed per test, different between tests.
    seed = sum(map(ord, request.node.name))
    return np.random.default_rng(seed)
