"""F.binary_cross_entropy_with_logits and nn.BCEWithLogitsLoss
(ampc/nn/_bce.py): values, gradients and second derivatives against torch
for every reduction with weight and pos_weight, logits of 0 (where the
stable form has kinks) and +-100, the gradients of weight and pos_weight
(beyond PyTorch) by differences, autocast's float32, the errors; on the
CPU and (cuda-marked) the GPU."""
import numpy as np
import pytest

import ampc
import ampc.nn.functional as F
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import gradcheck, torch_or_skip


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(5, 3)) * 3).astype(np.float32)
    x[0, 0], x[1, 1], x[2, 2] = 0.0, 100.0, -100.0
    y = rng.random((5, 3)).astype(np.float32)
    w = (rng.random((1, 3)) + 0.5).astype(np.float32)
    pw = (rng.random(3) + 0.5).astype(np.float32)
    return x, y, w, pw


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extra", ["", "weight", "pos_weight", "both"])
def test_matches_torch_to_second_order(device, reduction, extra):
    torch = torch_or_skip()
    x, y, w, pw = data()
    results = []
    for lib, dev in ((ampc, device), (torch, "cpu")):
        xi = lib.tensor(x).to(dev).requires_grad_()
        yi = lib.tensor(y).to(dev).requires_grad_()
        wi = lib.tensor(w).to(dev) if extra in ("weight", "both") else None
        pi = lib.tensor(pw).to(dev) if extra in ("pos_weight", "both") \
            else None
        fn = F if lib is ampc else torch.nn.functional
        out = fn.binary_cross_entropy_with_logits(
            xi, yi, weight=wi, pos_weight=pi, reduction=reduction)
        k = lib.arange(1.0, out.numel() + 1).to(dev).reshape(out.shape)
        gx, gy = lib.autograd.grad((out * k).sum(), (xi, yi),
                                   create_graph=True)
        hx, hy = lib.autograd.grad((gx * gx).sum() + (gy * gy).sum(),
                                   (xi, yi))
        results.append([t.detach().cpu().numpy()
                        for t in (out, gx, gy, hx, hy)])
    for got, want in zip(*results):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_weight_and_pos_weight_gradients_by_differences():
    x, y, w, pw = data(1)
    x[np.abs(x) < 0.1] = 0.5
    x = np.clip(x, -5, 5)

    def reference(a, b, c, d):
        sp = np.logaddexp(0.0, -a)
        return c * ((1 - b) * a + ((d - 1) * b + 1) * sp)

    gradcheck(lambda a, b, c, d: F.binary_cross_entropy_with_logits(
        a, b, weight=c, pos_weight=d, reduction="none"), reference,
        None, values=[v.astype(np.float64) for v in (x, y, w, pw)])


def test_module_autocast_and_errors():
    x, y, w, pw = data(2)
    crit = ampc.nn.BCEWithLogitsLoss(weight=ampc.tensor(w),
                                     pos_weight=ampc.tensor(pw))
    assert set(dict(crit.named_buffers())) == {"weight", "pos_weight"}
    want = F.binary_cross_entropy_with_logits(
        ampc.tensor(x), ampc.tensor(y), ampc.tensor(w),
        pos_weight=ampc.tensor(pw))
    assert crit(ampc.tensor(x), ampc.tensor(y)).item() == want.item()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = F.binary_cross_entropy_with_logits(
            ampc.tensor(x).bfloat16(), ampc.tensor(y).bfloat16())
    assert out.dtype is ampc.float32        # an autocast float32 op
    with pytest.raises(ValueError, match=r"Target size .* must be the same "
                                         "as input size"):
        F.binary_cross_entropy_with_logits(ampc.zeros(2, 3), ampc.zeros(3))
    with pytest.raises(TypeError, match="argument 'target' .* must be "
                                        "Tensor"):
        F.binary_cross_entropy_with_logits(ampc.zeros(3), 1.0)
