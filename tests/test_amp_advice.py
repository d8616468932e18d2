"""ampc.amp.suggest_autocast: the dtype and scaler advice per device and
GPU generation (the GPU's properties stubbed, so every branch runs here),
and its errors."""
import pytest

import ampc
import ampc.cuda
from ampc.amp import AutocastChoice, suggest_autocast


class _Props:
    def __init__(self, major, minor, name="Test GPU"):
        self.major, self.minor, self.name = major, minor, name


@pytest.fixture
def gpu(monkeypatch):
    """Pretends a GPU of the given compute capability is usable."""
    def make(major, minor):
        monkeypatch.setattr(ampc.cuda, "is_available", lambda: True)
        monkeypatch.setattr(ampc.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(ampc.cuda, "get_device_properties",
                            lambda device=None: _Props(major, minor))
    return make


def test_cpu_is_bfloat16_without_a_scaler():
    c = suggest_autocast("cpu")
    assert isinstance(c, AutocastChoice)
    assert (c.device_type, c.dtype, c.use_grad_scaler) == \
        ("cpu", ampc.bfloat16, False)
    assert "float32's speed" in c.reason
    assert str(c).startswith(
        "autocast('cpu', dtype=ampc.bfloat16) (no GradScaler): ")


@pytest.mark.parametrize("cc,dtype,scaler,why", [
    ((9, 0), ampc.bfloat16, False, "bfloat16 tensor cores"),
    ((8, 0), ampc.bfloat16, False, "bfloat16 tensor cores"),
    ((7, 5), ampc.float16, True, "no bfloat16 arithmetic"),
    ((6, 1), ampc.float16, True, "no tensor cores"),
])
def test_gpu_generations(gpu, cc, dtype, scaler, why):
    gpu(*cc)
    c = suggest_autocast()          # None picks the (pretended) GPU
    assert (c.device_type, c.dtype, c.use_grad_scaler) == \
        ("cuda", dtype, scaler)
    assert why in c.reason and f"compute capability {cc[0]}.{cc[1]}" in \
        c.reason
    assert ("with a GradScaler" in str(c)) == scaler


def test_default_device_without_a_gpu(monkeypatch):
    monkeypatch.setattr(ampc.cuda, "is_available", lambda: False)
    assert suggest_autocast().device_type == "cpu"
    with pytest.raises(RuntimeError, match=r"suggest_autocast\(\): "
                       r"device_type 'cuda', but no CUDA GPU is usable"):
        suggest_autocast("cuda")


def test_bad_device_type():
    with pytest.raises(ValueError, match=r"device_type must be 'cuda', "
                       r"'cpu' or None, got 'tpu'"):
        suggest_autocast("tpu")


def test_the_advice_is_what_autocast_and_grad_scaler_accept():
    c = suggest_autocast("cpu")
    with ampc.autocast(c.device_type, dtype=c.dtype):
        y = ampc.nn.functional.linear(ampc.ones(2, 3), ampc.ones(4, 3))
    assert y.dtype == c.dtype
    assert ampc.amp.GradScaler(c.device_type,
                               enabled=c.use_grad_scaler).is_enabled() is \
        c.use_grad_scaler


@pytest.mark.parametrize("module", ["ampc.amp", "ampc.amp.advice"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
