"""ampc.finfo / ampc.iinfo: the limits are the dtypes' real ones (checked
through ampc's own casts) and torch's; ampc.amp.is_autocast_available."""
import math

import numpy as np
import pytest

import ampc
from helpers import to64, torch_or_skip

FLOATS = (ampc.float32, ampc.float16, ampc.bfloat16)


@pytest.mark.parametrize("dt", FLOATS)
def test_limits_hold_in_the_dtype(dt):
    fi = ampc.finfo(dt)
    t = ampc.tensor([fi.max, fi.min, fi.eps, 1.0 + fi.eps,
                     1.0 + fi.eps / 4, fi.smallest_normal,
                     fi.smallest_normal / 2]).to(dt)
    v = to64(t)
    assert v[0] == fi.max and v[1] == fi.min          # exact, finite
    assert v[2] == fi.eps and v[3] == 1.0 + fi.eps    # 1 + eps is next
    assert v[4] == 1.0                                # below half eps: 1
    assert v[5] == fi.smallest_normal
    # the next power of two beyond max overflows to inf
    assert math.isinf(to64(ampc.tensor([fi.max]).to(dt) * 2)[0])
    # half the smallest normal is subnormal (nonzero) in every dtype here
    assert 0 < v[6] < fi.smallest_normal
    assert fi.tiny == fi.smallest_normal and fi.bits == dt.itemsize * 8
    assert fi.dtype == dt.name


def test_matches_torch():
    torch = torch_or_skip()
    for dt in FLOATS:
        a, t = ampc.finfo(dt), torch.finfo(getattr(torch, dt.name))
        for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal",
                     "resolution", "dtype"):
            assert getattr(a, attr) == getattr(t, attr), (dt, attr)
        assert repr(a) == repr(t)
    a, t = ampc.iinfo(ampc.int64), torch.iinfo(torch.int64)
    assert (a.bits, a.min, a.max, a.dtype) == (t.bits, t.min, t.max,
                                               t.dtype)
    assert repr(a) == repr(t)


def test_defaults_equality_and_errors():
    assert ampc.finfo() == ampc.finfo(ampc.float32)
    assert ampc.finfo(ampc.float16) != ampc.finfo(ampc.bfloat16)
    assert ampc.iinfo(ampc.int64).max == np.iinfo(np.int64).max
    with pytest.raises(TypeError, match="requires a floating point input "
                       "type. Use ampc.iinfo"):
        ampc.finfo(ampc.int64)
    with pytest.raises(TypeError, match="must be an ampc.dtype, not str"):
        ampc.finfo("float16")
    with pytest.raises(TypeError, match="ampc.bool is not supported by "
                       "ampc.iinfo"):
        ampc.iinfo(ampc.bool)


def test_is_autocast_available():
    assert ampc.amp.is_autocast_available("cpu")
    assert ampc.amp.is_autocast_available("cuda")
    with pytest.raises(RuntimeError, match="device type"):
        ampc.amp.is_autocast_available("tpu")
