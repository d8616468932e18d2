"""Shared fixtures: every CPU dispatch level the machine has, a fixed seed,
and grad mode restored after each test."""
import numpy as np
import pytest

import ampc
from helpers import levels


@pytest.fixture(params=levels())
def cpu_level(request):
    """Run the test once per CPU level (ref, avx2, avx512 as available),
    restoring the level in use afterwards."""
    prev = ampc._C.cpu_capability()
    ampc._C._set_cpu_level(request.param)
    try:
        yield request.param
    finally:
        ampc._C._set_cpu_level(prev)


@pytest.fixture(autouse=True)
def _isolate():
    ampc.manual_seed(0)
    prev = ampc.is_grad_enabled()
    yield
    ampc.autograd._mode.enabled = prev


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
