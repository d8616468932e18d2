"""norm, var and std (ampc/_tensor_stats.py): against torch for every p,
dims, keepdim and correction, 16-bit inputs computed in float32 and
rounded once, the 2-norm's zero gradient at a zero vector, second
derivatives, and the errors; on the CPU and (cuda-marked) on the GPU."""
import math

import numpy as np
import pytest

import ampc
from cuda_helpers import device  # noqa: F401 (a fixture)
from helpers import assert_close, torch_or_skip

CASES = [
    ("norm", dict()), ("norm", dict(p=1)), ("norm", dict(p=math.inf)),
    ("norm", dict(p=-math.inf, dim=1)), ("norm", dict(p=0)),
    ("norm", dict(p=3, dim=(0, 2))), ("norm", dict(dim=-1, keepdim=True)),
    ("norm", dict(p="fro", dim=(1, 2))),
    ("var", dict()), ("var", dict(dim=1)), ("var", dict(dim=(0, 2),
                                                         keepdim=True)),
    ("var", dict(unbiased=False)), ("var", dict(correction=2, dim=2)),
    ("std", dict()), ("std", dict(dim=0, unbiased=False)),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_values_and_gradients_match_torch(device, dtype):
    torch = torch_or_skip()
    rng = np.random.default_rng(1)
    v = rng.normal(size=(3, 5, 4)).astype(np.float32)
    for name, kw in CASES:
        x = ampc.tensor(v).to(getattr(ampc, dtype)).to(device)
        x.requires_grad_()
        t = torch.tensor(v).to(getattr(torch, dtype)).requires_grad_()
        got, want = getattr(x, name)(**kw), getattr(t, name)(**kw)
        assert got.dtype is x.dtype
        assert tuple(got.shape) == tuple(want.shape), (name, kw)
        assert_close(got.float().cpu(), want.detach().double().numpy(),
                     dtype, msg=f"{name} {kw}: ")
        if dtype == "float32" and kw.get("p") not in (0,):
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(x.grad.cpu().numpy(),
                                       t.grad.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} {kw}")


def test_2_norm_gradient_at_zero_and_second_derivatives():
    torch = torch_or_skip()
    z = ampc.zeros(3, requires_grad=True)
    z.norm().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [0, 0, 0])
    v = np.array([[1.0, -2.0, 3.0], [0.0, 0.0, 0.0]], np.float32)
    results = []
    for lib in (ampc, torch):
        y = lib.tensor(v, requires_grad=True)
        g, = lib.autograd.grad(y.norm(dim=1).sum(), y, create_graph=True)
        h, = lib.autograd.grad((g * g).sum() + y.std(), y)
        results.append((g.detach().numpy(), h.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_errors_and_the_degrees_of_freedom_warning():
    with pytest.raises(RuntimeError, match="norm\\(\\): input dtype should "
                                           "be either floating point"):
        ampc.tensor([1, 2]).norm()
    with pytest.raises(RuntimeError, match="p must be a number or 'fro'"):
        ampc.ones(2).norm(p="nuc")
    with pytest.raises(IndexError, match="Dimension out of range"):
        ampc.ones(2, 3).std(dim=2)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert math.isnan(ampc.tensor([1.0]).std().item())


def test_review_cases_match_torch():
    """Zero gradients where the chain rule would give 0 * inf (a zero
    norm, a zero element for p < 1, a zero variance), inf-norm ties
    sharing the gradient over several dims, keepdim with every dim, dim=()
    meaning every dim, var(False), a zero divisor giving inf, and a
    float16 std taken before its one rounding."""
    torch = torch_or_skip()

    def grads(lib):
        out = []
        o = lib.ones(4, requires_grad=True)
        o.std().backward()
        out.append(o.grad)
        for p in (3, 0.5, -1):
            for v in ([0.0, 1.0, -2.0], [0.0, 0.0, 0.0]):
                z = lib.tensor(v, requires_grad=True)
                z.norm(p).backward()
                out.append(z.grad)
        t = lib.tensor([[1.0, -3.0], [3.0, 2.0]], requires_grad=True)
        t.norm(math.inf, dim=(0, 1)).backward()
        out.append(t.grad)
        w = lib.arange(12.0).reshape(3, 4)
        out += [w.norm(keepdim=True), w.var(keepdim=True), w.norm(dim=()),
                w.var(dim=[]), lib.tensor([1.0, 2.0, 4.0]).var(False),
                lib.tensor([-300.0, 300.0]).half().std().float()]
        with pytest.warns(UserWarning, match="degrees of freedom"):
            out.append(lib.tensor([1.0, 2.0]).var(correction=2))
        return out

    for got, want in zip(grads(ampc), grads(torch)):
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(),
                                   want.detach().numpy(), rtol=1e-4)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        ampc.ones(2, 2).norm(dim=(0, 0))
    with pytest.raises(RuntimeError, match="both unbiased and correction"):
        ampc.ones(3).var(unbiased=False, correction=1)
