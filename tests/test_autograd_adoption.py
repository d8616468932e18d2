"""A leaf's first gradient adopted without a copy: when the engine made the
gradient itself (the cast back to the leaf's dtype after autocast, or the
sum of two contributions) and holds it nowhere else, it becomes ``.grad``
as it is, as PyTorch steals a gradient nobody else holds.  Checked: the
copy is gone, the values are right, later accumulation in place stays
right, and a gradient that someone else may hold (the user's, a node's
output) is still copied."""
import numpy as np
import pytest

import ampc
import ampc.autograd.function as fn_module
from helpers import to64


@pytest.fixture
def copies(monkeypatch):
    """Counts the copies AccumulateGrad makes (its `_cast`)."""
    seen = []
    real = fn_module._cast

    def counting(t, dtype):
        seen.append(tuple(t.shape))
        return real(t, dtype)
    monkeypatch.setattr(fn_module, "_cast", counting)
    return seen


def _linear_under_autocast(w, b, x, dtype=ampc.bfloat16):
    with ampc.autocast("cpu", dtype=dtype):
        return ampc.nn.functional.linear(x, w, b).float().sum()


@pytest.mark.parametrize("dtype", [ampc.bfloat16, ampc.float16])
def test_autocast_weight_gradients_are_adopted(copies, dtype):
    rng = np.random.default_rng(0)
    w = ampc.tensor(rng.standard_normal((5, 7)), dtype=ampc.float32,
                    requires_grad=True)
    b = ampc.tensor(rng.standard_normal(5), dtype=ampc.float32,
                    requires_grad=True)
    x = ampc.tensor(rng.standard_normal((3, 7)), dtype=ampc.float32)
    _linear_under_autocast(w, b, x, dtype).backward()
    assert copies == [], "AccumulateGrad copied an engine-made gradient"
    assert w.grad.dtype is ampc.float32 and w.grad.is_contiguous()
    # d(sum)/dw = column sums of x in each row (x rounded to the low dtype)
    xl = to64(x.to(dtype))
    np.testing.assert_allclose(to64(w.grad), np.tile(xl.sum(0), (5, 1)),
                               rtol=1e-2)
    np.testing.assert_allclose(to64(b.grad), np.full(5, 3.0))
    # a second backward adds in place into the adopted tensor
    first = to64(w.grad).copy()
    _linear_under_autocast(w, b, x, dtype).backward()
    np.testing.assert_allclose(to64(w.grad), 2 * first, rtol=1e-6)
    np.testing.assert_allclose(to64(b.grad), np.full(5, 6.0))


def test_users_gradient_is_never_adopted_or_changed(copies):
    w = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g = ampc.tensor([0.5, -1.0, 2.0])
    w.backward(g)                       # a root gradient: the user's
    assert len(copies) == 1
    w.backward(g)                       # accumulates into w.grad in place
    assert to64(g).tolist() == [0.5, -1.0, 2.0]
    assert to64(w.grad).tolist() == [1.0, -2.0, 4.0]


def test_cast_of_users_gradient_is_adopted_and_the_user_keeps_theirs(
        copies):
    w = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g16 = ampc.tensor([0.5, -1.0, 2.0], dtype=ampc.float16)
    w.half().backward(g16)              # the engine casts g16 to float32
    assert copies == []
    w.half().backward(g16)
    assert to64(g16).tolist() == [0.5, -1.0, 2.0]
    assert to64(w.grad).tolist() == [1.0, -2.0, 4.0]


def test_node_outputs_are_still_copied(copies):
    """A node's gradient output may be shared (x + x hands the same
    tensor to both inputs; a view's backward may pass its input on): not
    engine-made, so copied."""
    w = ampc.tensor([1.0, 2.0], requires_grad=True)
    v = ampc.tensor([3.0, 4.0], requires_grad=True)
    (w + v).sum().backward()
    assert len(copies) == 2
    assert w.grad.data_ptr() != v.grad.data_ptr()
    w.grad.add_(1.0)
    assert to64(v.grad).tolist() == [1.0, 1.0]


def test_summed_contributions_are_adopted(copies):
    w = ampc.tensor([1.0, 2.0], requires_grad=True)
    (w * 3 + w * 5).sum().backward()    # two contributions, summed
    assert copies == []
    assert to64(w.grad).tolist() == [8.0, 8.0]


def test_broadcast_gradient_is_not_adopted_as_a_view(copies):
    w = ampc.tensor([[1.0], [2.0]], requires_grad=True)
    (w.half() * ampc.ones(2, 3, dtype=ampc.float16)).float().sum() \
        .backward()
    assert w.grad.is_contiguous() and tuple(w.grad.shape) == (2, 1)
    assert to64(w.grad).tolist() == [[3.0], [3.0]]


def test_two_roots_for_one_leaf_are_summed_and_adopted(copies):
    w = ampc.tensor([1.0, 2.0], requires_grad=True)
    g = ampc.tensor([0.25, 0.5])
    ampc.autograd.backward([w, w], [g, g])
    assert copies == []
    assert to64(w.grad).tolist() == [0.5, 1.0]
    w.grad.zero_()
    assert to64(g).tolist() == [0.25, 0.5]


def test_retained_and_leaf_gradients_stay_apart():
    w = ampc.tensor([1.0, 2.0], requires_grad=True)
    y = w.half()
    y.retain_grad()
    z = y.float() * 3
    z.retain_grad()
    z.sum().backward()
    ptrs = {w.grad.data_ptr(), y.grad.data_ptr(), z.grad.data_ptr()}
    assert len(ptrs) == 3
    w.grad.zero_()
    assert to64(y.grad).tolist() == [3.0, 3.0]
    assert to64(z.grad).tolist() == [1.0, 1.0]


def test_autograd_grad_result_is_not_the_leafs_grad():
    a = ampc.tensor([1.0, 2.0], requires_grad=True)
    loss = (a.half() * 7).float().sum()
    (got,) = ampc.autograd.grad(loss, [a], retain_graph=True)
    assert a.grad is None
    loss.backward()
    a.grad.zero_()
    assert to64(got).tolist() == [7.0, 7.0]


def test_reshaped_gradient_without_a_cast_is_copied(copies):
    """_sum_to may only reshape (a view of the node's output): not made by
    the engine, so copied."""
    w = ampc.tensor([[1.0, 2.0, 3.0]], requires_grad=True)     # (1, 3)
    x = ampc.ones(3)
    (w * x).sum().backward()            # the product's grad is (1, 3) too
    v = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (v.view(1, 3) + ampc.zeros(1, 3)).sum().backward()
    assert to64(v.grad).tolist() == [1.0, 1.0, 1.0]
    assert len(copies) == 2
