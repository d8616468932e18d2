"""set_printoptions: precision, threshold, edgeitems, linewidth, profiles
and sci_mode, as torch prints with the same options."""
import numpy as np
import pytest

import ampc

try:
    import torch
except ImportError:     # the torch comparison skips
    torch = None


@pytest.fixture(autouse=True)
def _default_options():
    yield
    ampc.set_printoptions(profile="default")
    if torch is not None:
        torch.set_printoptions(profile="default")


def test_precision_sci_mode_and_summaries():
    ampc.set_printoptions(precision=2)
    assert repr(ampc.tensor([1.23456, -2.5])) == "tensor([ 1.23, -2.50])"
    ampc.set_printoptions(sci_mode=True)
    assert repr(ampc.tensor([1.5])) == "tensor([1.50e+00])"  # precision kept
    ampc.set_printoptions(threshold=4, edgeitems=1)
    assert repr(ampc.arange(10)) == "tensor([0,  ..., 9])"
    ampc.set_printoptions(profile="full")
    assert "..." not in repr(ampc.arange(5000))
    ampc.set_printoptions(profile="default")
    assert "..." in repr(ampc.arange(5000))


def test_linewidth_wraps_rows():
    ampc.set_printoptions(linewidth=20)
    lines = repr(ampc.arange(12).float()).split("\n")
    assert len(lines) > 2 and all(len(s) <= 20 for s in lines)


def test_bad_profile():
    with pytest.raises(ValueError, match="profile must be one of"):
        ampc.set_printoptions(profile="tiny")


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("options", [
    dict(precision=2), dict(threshold=5), dict(edgeitems=1, threshold=10),
    dict(linewidth=30), dict(profile="short"), dict(profile="full"),
    dict(sci_mode=True), dict(sci_mode=False),
    dict(precision=6, sci_mode=True)])
def test_matches_torch(options):
    values = [np.array([1.23456789, -2.5, 1e-5], np.float32),
              np.arange(2000, dtype=np.float32).reshape(40, 50) / 7,
              np.array([3.0, 4.0], np.float32),
              np.array([123456.789], np.float32),
              np.arange(30, dtype=np.int64)]
    ampc.set_printoptions(**options)
    torch.set_printoptions(**options)
    for v in values:
        assert repr(ampc.tensor(v)) == repr(torch.tensor(v))
