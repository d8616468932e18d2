"""Higher-order gradients: ``autograd.grad(..., create_graph=True)`` and
``backward(create_graph=True)``.  Each supported op's second derivative
(a Hessian-vector product) against central differences of its first
derivative and, where torch is installed, against torch; PyTorch's
``test_grad_scaling_penalty`` scenario; the clear error for ops without a
differentiable backward."""
import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda
from helpers import to64, torch_or_skip
from test_grad_scaler import inject_inf, run_scaling_case


def F(lib):
    return lib.nn.functional


# f(lib, x, y) -> a scalar; x and y are (3, 4) float32 values in [0.5, 2)
# (positive, for sqrt, log and pow) unless a case reshapes them.
CASES = {
    "add_sub": lambda lib, x, y: ((x + y) * (x - 2 * y)).sum(),
    "mul": lambda lib, x, y: (x * y * x).sum(),
    "div": lambda lib, x, y: (x / y + 3 / x).sum(),
    "pow_scalar": lambda lib, x, y: (x ** 3 + y ** -1.5).sum(),
    "pow_tensor": lambda lib, x, y: (x ** y).sum(),
    "pow_scalar_base": lambda lib, x, y: (2.0 ** (x * y)).sum(),
    "sqrt_exp_log": lambda lib, x, y: (x.sqrt() * y.exp() + (x * y).log()
                                       ).sum(),
    # (each piecewise op stays on one side of its kinks for every element,
    # so that the differences are smooth)
    "abs_neg": lambda lib, x, y: ((x - 0.25).abs() * (x - 2.25).abs()
                                  * -y * x).sum(),
    "relu": lambda lib, x, y: ((lib.relu(x - 0.25) + lib.relu(x - 2.25))
                               * y * x).sum(),
    "F_relu": lambda lib, x, y: (F(lib).relu(x - 0.25) ** 2 * y).sum(),
    "clamp": lambda lib, x, y: ((x * y).clamp(min=0.1) * x
                                + x.clamp(max=0.4) * y).sum(),
    "maximum": lambda lib, x, y: (lib.maximum(x * x, y - 3) * y).sum(),
    "minimum": lambda lib, x, y: (lib.minimum(x * y, x - 3) * x).sum(),
    "cast": lambda lib, x, y: ((x * y).to(lib.float16).float() * x).sum(),
    "sum_mean": lambda lib, x, y: ((x * y).sum(0) ** 2).mean()
    + (x * x).mean(1, keepdim=True).sum() * y.sum(),
    "cat_stack": lambda lib, x, y: (lib.cat([x * y, x], 1) ** 2).sum()
    + (lib.stack([x, y * x], 0) ** 3).sum(),
    "views": lambda lib, x, y: (
        (x.reshape(4, 3) * y.view(4, 3)).flatten() ** 2).sum()
    + (x.transpose(0, 1).unsqueeze(0) ** 2 * y.t()).squeeze(0).sum()
    + (x.permute(1, 0).contiguous() ** 3).sum()
    + (x[:1].expand(3, 4) * y * x).sum(),
    "matmul": lambda lib, x, y: ((x @ y.t()) ** 2).sum()
    + ((x[0] @ y.t()) ** 2).sum() + (x[0] @ y[1] * x[1] @ y[2])
    + ((x.reshape(1, 3, 4) @ y.t()) ** 2).sum(),
    "linear": lambda lib, x, y: (F(lib).linear(
        x.reshape(3, 1, 4) * y, x * y, y[0, :3]) ** 2).sum(),
    "linear_1d": lambda lib, x, y: (F(lib).linear(x[0], y * x) ** 2).sum(),
    "mse_loss": lambda lib, x, y: F(lib).mse_loss(x * x, y)
    + F(lib).mse_loss(x, y * y, reduction="sum")
    + (F(lib).mse_loss(x * y, x, reduction="none") ** 2).sum(),
}


def values(seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
            for _ in range(3)]


def first_grads(f, x, y, create_graph=False):
    xt = ampc.tensor(x, requires_grad=True)
    yt = ampc.tensor(y, requires_grad=True)
    gx, gy = ampc.autograd.grad(f(ampc, xt, yt), (xt, yt),
                                create_graph=create_graph)
    return xt, yt, gx, gy


def hvp(lib, f, x, y, v):
    """d/d(x, y) of <grad_x f, v>: a Hessian-vector product."""
    xt = lib.tensor(x, requires_grad=True)
    yt = lib.tensor(y, requires_grad=True)
    gx, gy = lib.autograd.grad(f(lib, xt, yt), (xt, yt), create_graph=True)
    assert gx.requires_grad and gx.grad_fn is not None
    hx, hy = lib.autograd.grad((gx * lib.tensor(v)).sum(), (xt, yt),
                               allow_unused=True)
    return tuple(np.zeros(x.shape) if h is None else to64(h.detach())
                 for h in (hx, hy))


@pytest.mark.parametrize("case", sorted(CASES))
def test_second_derivative_matches_differences_and_torch(case):
    f = CASES[case]
    x, y, v = values(len(case))
    hx, hy = hvp(ampc, f, x, y, v)
    # central differences of the first gradient along v (in x)
    eps = 1e-2
    plus = first_grads(f, x + eps * v, y)
    minus = first_grads(f, x - eps * v, y)
    dx = (to64(plus[2]) - to64(minus[2])) / (2 * eps)
    dy = (to64(plus[3]) - to64(minus[3])) / (2 * eps)
    # H is symmetric: d(grad_x . v)/dy = d(grad_y)/dx along v.  (float16
    # rounding inside "cast" makes its differences rougher.)
    tol = 6e-2 if case == "cast" else 2e-2
    np.testing.assert_allclose(hx, dx, rtol=tol, atol=tol)
    np.testing.assert_allclose(hy, dy, rtol=tol, atol=tol)
    torch = torch_or_skip()
    tx, ty = hvp(torch, f, x, y, v)
    np.testing.assert_allclose(hx, tx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(hy, ty, rtol=1e-4, atol=1e-4)


def test_backward_create_graph_keeps_a_graph_in_grad():
    x = ampc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    g = x.grad
    assert g.grad_fn is not None and g.tolist() == [3.0, 12.0, 27.0]
    x.grad = None
    g.sum().backward()                       # d/dx 3x^2 = 6x
    assert x.grad.tolist() == [6.0, 12.0, 18.0]
    # a second create_graph pass adds into .grad out of place
    y = ampc.tensor([1.0, 2.0], requires_grad=True)
    (y * y).sum().backward(create_graph=True)
    first = y.grad
    (y * y).sum().backward(create_graph=True)
    assert y.grad is not first and y.grad.tolist() == [4.0, 8.0]
    assert first.tolist() == [2.0, 4.0]


def test_create_graph_retains_the_graph_by_default():
    x = ampc.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    ampc.autograd.grad(loss, x, create_graph=True)
    g, = ampc.autograd.grad(loss, x)            # the graph is still there
    np.testing.assert_allclose(to64(g), np.exp([1.0, 2.0]) * [2.0, 3.0],
                               rtol=1e-6)


def test_users_function_backward_runs_with_grad_mode_on():
    class Cube(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x

    x = ampc.tensor([1.0, -2.0], requires_grad=True)
    g, = ampc.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert ampc.autograd.grad(g.sum(), x)[0].tolist() == [6.0, -12.0]


def test_users_function_saved_output_is_differentiable():
    """A saved output reaches the user's backward as an alias whose
    grad_fn is the node (as PyTorch unpacks it): d/dx of g * exp(x)
    through the saved exp(x), not a constant."""
    class MyExp(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return g * out

    x = ampc.tensor([0.0, 1.0], requires_grad=True)
    y = MyExp.apply(x)
    g, = ampc.autograd.grad((y * x).sum(), x, create_graph=True)
    assert y.grad_fn._saved[0].grad_fn is None    # no alias kept: no cycle
    h, = ampc.autograd.grad(g.sum(), x)   # d2/dx2 x e^x = (x + 2) e^x
    np.testing.assert_allclose(to64(h), np.exp([0.0, 1.0]) * [2.0, 3.0],
                               rtol=1e-6)


CONV_CASES = {
    # f(lib, x, w): x (2, 4, 7, 6), w (6, 2, 3, 3), values in [0.5, 2)
    "groups_stride_pad": lambda lib, x, w: (F(lib).conv2d(
        x, w, stride=2, padding=1, groups=2) ** 2).sum(),
    "dilation_bias": lambda lib, x, w: (F(lib).conv2d(
        x, w.reshape(3, 4, 3, 3), w[0, 0, 0], dilation=(2, 1)) ** 2
        * x[0, :3, :3, :2].sum()).sum(),
    # (shifted so that every ReLU input stays on one side of 0: the
    # differences stay smooth)
    "relu_then_linear": lambda lib, x, w: _relu_linear(
        lib, F(lib).relu(F(lib).conv2d(x, w, padding=1, groups=2) + 20.0)
        + F(lib).relu(F(lib).conv2d(x, w, groups=2) - 20.0).sum()),
}


def _relu_linear(lib, h):
    h = h.flatten(1)
    return (F(lib).linear(h, h * 0.01) ** 2).sum()


def test_sequential_fused_conv_relu_gives_the_same_second_derivative():
    """Sequential runs Conv2d + ReLU as one node (the ReLU in the conv's
    epilogue); its create_graph formula masks like the separate ReLU."""
    def make(fused):
        ampc.manual_seed(3)
        conv = ampc.nn.Conv2d(3, 4, 3, padding=1)
        return ampc.nn.Sequential(conv, ampc.nn.ReLU()) if fused else \
            (lambda t: F(ampc).relu(conv(t)))
    x = ampc.randn(2, 3, 6, 5, requires_grad=True)
    got = []
    for fused in (True, False):
        net = make(fused)
        g, = ampc.autograd.grad((net(x) ** 3).sum(), x, create_graph=True)
        got.append(to64(ampc.autograd.grad((g ** 2).sum(), x)[0]))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv2d_second_derivatives(case):
    """Through conv2d's input and weight gradients, each a differentiable
    op (ConvInputGrad, ConvWeightGrad) whose gradients are convolutions
    and each other; groups, stride, padding, dilation and a bias."""
    f = CONV_CASES[case]
    rng = np.random.default_rng(len(case))
    x = rng.uniform(0.5, 2.0, (2, 4, 7, 6)).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, (6, 2, 3, 3)).astype(np.float32)
    v = rng.uniform(-1.0, 1.0, x.shape).astype(np.float32)
    hx, hw = hvp(ampc, f, x, w, v)
    eps = 1e-2
    plus = first_grads(f, x + eps * v, w)
    minus = first_grads(f, x - eps * v, w)
    for h, k in ((hx, 2), (hw, 3)):
        fd = (to64(plus[k]) - to64(minus[k])) / (2 * eps)
        scale = np.abs(fd).max()
        np.testing.assert_allclose(h, fd, rtol=2e-2, atol=2e-2 * scale)
    torch = torch_or_skip()
    tx, tw = hvp(torch, f, x, w, v)
    np.testing.assert_allclose(hx, tx, rtol=1e-4, atol=1e-4 * np.abs(tx).max())
    np.testing.assert_allclose(hw, tw, rtol=1e-4, atol=1e-4 * np.abs(tw).max())


def test_third_derivative_through_conv2d():
    """d3/dw3 of sum(conv(x, w)^3) / 6 along ones = sum over outputs of
    (conv(x, 1-kernel))^3: the conv gradient ops are differentiable in
    turn."""
    x = ampc.tensor(np.random.default_rng(1).uniform(
        0.5, 2.0, (1, 1, 4, 4)).astype(np.float32))
    w = ampc.ones(1, 1, 2, 2, requires_grad=True)
    y = (F(ampc).conv2d(x, w) ** 3).sum() / 6
    g1, = ampc.autograd.grad(y, w, create_graph=True)
    g2, = ampc.autograd.grad(g1.sum(), w, create_graph=True)
    g3, = ampc.autograd.grad(g2.sum(), w)
    s = to64(F(ampc).conv2d(x, ampc.ones(1, 1, 2, 2)))
    # y = sum(c^3)/6 with c linear in w, dc/dw_k = patch_k: d3y along
    # (1,1,1,1) for each w_k is sum(patch_k * (sum_j patch_j)^2)
    xs = to64(x)[0, 0]
    patches = [xs[i:i + 3, j:j + 3] for i in range(2) for j in range(2)]
    want = [np.sum(p * s[0, 0] ** 2) for p in patches]
    np.testing.assert_allclose(to64(g3).ravel(), want, rtol=1e-4)


LOSS_CASES = {
    # f(lib, x, y): x (3, 4) logits, y (3, 4) used as weights and shifts
    "cross_entropy_mean": lambda lib, x, y: F(lib).cross_entropy(
        x * y, lib.tensor([0, 3, 1])),
    "cross_entropy_weight_ignore": lambda lib, x, y: F(lib).cross_entropy(
        x * x, lib.tensor([2, -100, 1]), weight=lib.tensor(
            [0.5, 2.0, 1.5, 1.0])) * y.sum(),
    "cross_entropy_none_sum_1d": lambda lib, x, y: (F(lib).cross_entropy(
        x + y, lib.tensor([1, 1, 0]), reduction="none") ** 2).sum()
    + F(lib).cross_entropy(x[0] * y[1], lib.tensor(2), reduction="sum"),
    "nll_log_softmax": lambda lib, x, y: F(lib).nll_loss(
        F(lib).log_softmax(x * y, dim=1), lib.tensor([3, 0, 2]),
        reduction="sum") + (F(lib).log_softmax(x, dim=0) * y).sum(),
    "softmax": lambda lib, x, y: (F(lib).softmax(x * y, dim=1) ** 2 * y
                                  ).sum() + (F(lib).softmax(x, 0) * x).sum(),
}


@pytest.mark.parametrize("case", sorted(LOSS_CASES))
def test_softmax_and_loss_second_derivatives(case):
    """The fused cross-entropy keeps the log-probabilities, not the
    logits: its formula reaches the logits through a LogSoftmax node made
    for it; nll_loss's gradient is linear in the incoming one."""
    f = LOSS_CASES[case]
    rng = np.random.default_rng(len(case))
    x, y, v = (rng.uniform(-1.5, 1.5, (3, 4)).astype(np.float32)
               for _ in range(3))
    hx, hy = hvp(ampc, f, x, y, v)
    eps = 1e-2
    plus, minus = first_grads(f, x + eps * v, y), first_grads(f, x - eps * v,
                                                               y)
    for h, k in ((hx, 2), (hy, 3)):
        fd = (to64(plus[k]) - to64(minus[k])) / (2 * eps)
        np.testing.assert_allclose(h, fd, rtol=2e-2, atol=2e-3)
    torch = torch_or_skip()
    tx, ty = hvp(torch, f, x, y, v)
    np.testing.assert_allclose(hx, tx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hy, ty, rtol=1e-4, atol=1e-5)


def test_gradient_penalty_on_a_strided_conv_classifier_matches_torch():
    """A classifier with strided convolutions (no pooling), the
    cross-entropy and a gradient-norm penalty on its weights: the
    parameters' gradients after the penalised backward, against torch."""
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    labels = [1, 0, 3, 2]
    params = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in
              [(6, 3, 3, 3), (6,), (8, 6, 3, 3), (8,), (4, 32), (4,)]]

    def run(lib):
        ps = [lib.tensor(p, requires_grad=True) for p in params]
        Fl = F(lib)
        h = Fl.relu(Fl.conv2d(lib.tensor(x), ps[0], ps[1], stride=2,
                              padding=1))
        h = Fl.relu(Fl.conv2d(h, ps[2], ps[3], stride=2, padding=1))
        loss = Fl.cross_entropy(Fl.linear(h.flatten(1), ps[4], ps[5]),
                                lib.tensor(labels))
        grads = lib.autograd.grad(loss, ps, create_graph=True)
        penalty = sum(g.pow(2).sum() for g in grads).sqrt()
        (loss + penalty).backward()
        return [to64(p.grad.detach()) for p in ps]

    for a, b in zip(run(ampc), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pool", [(2, 2, 0), (3, 2, 1), ((2, 3), 1, 0)])
def test_max_pool2d_second_derivatives(pool):
    """Through max_pool2d's scatter to the indices and the gather back
    (_C.max_pool2d_gather), each the other's gradient.  The values are
    spread so that no window's maximum changes within the differences."""
    k, st, pad = pool
    rng = np.random.default_rng(k if isinstance(k, int) else 7)
    x = (rng.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6) * 0.1 - 12
         ).astype(np.float32)
    y = rng.uniform(-1.0, 1.0, (2, 3, 7, 6)).astype(np.float32)
    v = rng.uniform(-1.0, 1.0, x.shape).astype(np.float32)

    def f(lib, a, b):
        return (F(lib).max_pool2d(a * a * b, k, st, pad) ** 2).sum()
    hx, hy = hvp(ampc, f, x, y, v)
    eps = 1e-3
    plus, minus = first_grads(f, x + eps * v, y), first_grads(f, x - eps * v,
                                                               y)
    for h, i in ((hx, 2), (hy, 3)):
        fd = (to64(plus[i]) - to64(minus[i])) / (2 * eps)
        np.testing.assert_allclose(h, fd, rtol=2e-2,
                                   atol=2e-2 * np.abs(fd).max())
    torch = torch_or_skip()
    tx, ty = hvp(torch, f, x, y, v)
    np.testing.assert_allclose(hx, tx, rtol=1e-4, atol=1e-5 * np.abs(tx).max())
    np.testing.assert_allclose(hy, ty, rtol=1e-4, atol=1e-5 * np.abs(ty).max())


def lab_cnn(lib, params, x, labels, fused):
    """The lab's SimpleCNN shape in small: conv-relu-pool twice, then two
    linear layers; fused: ampc's Sequential folds each conv-relu-pool."""
    Fl = F(lib)
    h = lib.tensor(x)
    for i in (0, 2):
        if fused:
            conv = ampc.nn.Conv2d(*params[i].shape[1::-1], 3, padding=1)
            conv.weight, conv.bias = params[i], params[i + 1]
            h = ampc.nn.Sequential(conv, ampc.nn.ReLU(),
                                   ampc.nn.MaxPool2d(2))(h)
        else:
            h = Fl.max_pool2d(Fl.relu(Fl.conv2d(h, params[i], params[i + 1],
                                                padding=1)), 2)
    h = Fl.relu(Fl.linear(h.flatten(1), params[4], params[5]))
    return Fl.cross_entropy(Fl.linear(h, params[6], params[7]),
                            lib.tensor(labels))


@pytest.mark.parametrize("fused", [False, True])
def test_gradient_penalty_on_the_lab_cnn_matches_torch(fused):
    """PyTorch's AMP gradient-penalty recipe on the lab's model (with
    Sequential's conv+ReLU+pool fold, or the layers one by one): the
    parameters' gradients after the penalised backward, against torch."""
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    shapes = [(4, 3, 3, 3), (4,), (6, 4, 3, 3), (6,), (10, 24), (10,),
              (5, 10), (5,)]
    values = [rng.standard_normal(s).astype(np.float32) * 0.4
              for s in shapes]

    def run(lib):
        params = [(ampc.nn.Parameter(ampc.tensor(v)) if lib is ampc else
                   lib.tensor(v, requires_grad=True)) for v in values]
        loss = lab_cnn(lib, params, x, [1, 4, 0], fused and lib is ampc)
        grads = lib.autograd.grad(loss, params, create_graph=True)
        penalty = sum(g.pow(2).sum() for g in grads).sqrt()
        (loss + penalty).backward()
        return [to64(p.grad.detach()) for p in params]

    for a, b in zip(run(ampc), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_every_ampc_op_has_a_differentiable_backward():
    """Each of ampc's Functions (the nn and amp ones too) is in the table
    of formulas, so create_graph=True goes through any ampc graph."""
    import ampc.amp  # noqa: F401 (its Functions)
    from ampc.autograd import higher_order as H
    from ampc.autograd.function import Function, _ViewFunction
    from ampc.autograd.functions import _FromInput, _FromOutput
    from ampc.autograd.sort_scan import _Selection
    formulas = H._make_formulas()
    seen, todo = set(), [Function]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    missing = sorted(c.__qualname__ for c in seen
                     if c.__module__.startswith("ampc.") and
                     c not in (_ViewFunction, _FromInput,        # bases
                               _FromOutput, _Selection) and
                     c not in formulas)
    assert missing == []


def test_an_op_without_a_formula_says_so():
    class Opaque(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Opaque.__module__ = "ampc.somewhere"    # as if it were ampc's own
    x = ampc.randn(3, requires_grad=True)
    loss = Opaque.apply(x).sum()
    with pytest.raises(NotImplementedError,
                       match=r"OpaqueBackward: ampc has no differentiable "
                       r"backward for this op, so create_graph=True .* "
                       r"dropout, softmax"):
        ampc.autograd.grad(loss, x, create_graph=True)
    # the plain backward of the same graph still works
    assert ampc.autograd.grad(loss, x)[0].shape == x.shape


def test_create_graph_under_autocast_keeps_the_forward_dtypes():
    """Backward formulas run with autocast off: the first gradient of a
    float32 weight used in bfloat16 is float32 and has a graph; the
    penalty's gradient reaches the weight."""
    ampc.manual_seed(0)
    lin = ampc.nn.Linear(4, 3)
    x = ampc.randn(5, 4)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = lin(x)
    assert out.dtype is ampc.bfloat16
    gw, = ampc.autograd.grad(out.float().pow(2).sum(), lin.weight,
                             create_graph=True)
    assert gw.dtype is ampc.float32 and gw.grad_fn is not None
    penalty, = ampc.autograd.grad(gw.pow(2).sum(), lin.weight)
    assert penalty.dtype is ampc.float32 and penalty.abs().sum().item() > 0


def penalty_run(data, model, opt, scaler, loss_fn, skip_iter,
                try_scaling_api):
    """PyTorch's test_grad_scaling_penalty, line for line."""
    for i, (x, y) in enumerate(data):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        if try_scaling_api:
            grad_params = ampc.autograd.grad(
                scaler.scale(loss), model.parameters(), create_graph=True)
            inv_scale = 1.0 / scaler.get_scale()
            grad_params = [p * inv_scale for p in grad_params]
        else:
            grad_params = ampc.autograd.grad(loss, model.parameters(),
                                             create_graph=True)
        grad_norm = 0
        for grad in grad_params:
            grad_norm += grad.pow(2).sum()
        loss = loss + grad_norm.sqrt()
        if try_scaling_api:
            scaler.scale(loss).backward()
            if i == skip_iter and scaler.is_enabled():
                inject_inf(model)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if not scaler.is_enabled() or i != skip_iter:
                opt.step()


def test_grad_scaling_penalty():
    run_scaling_case(penalty_run, unskipped=3, skipped=1, atol=1e-5)


@pytest.mark.cuda
@requires_cuda
def test_penalty_step_on_cuda_matches_cpu():
    def step(device):
        ampc.manual_seed(0)
        model = ampc.nn.Sequential(ampc.nn.Linear(8, 8),
                                   ampc.nn.Linear(8, 8)).to(device)
        x = ampc.randn(8, 8).to(device)
        loss = F(ampc).mse_loss(model(x), x)
        grads = ampc.autograd.grad(loss, model.parameters(),
                                   create_graph=True)
        (loss + sum(g.pow(2).sum() for g in grads).sqrt()).backward()
        return [to64(p.grad.cpu()) for p in model.parameters()]

    # (float32 GEMMs on the GPU run without TF32 unless asked)
    for a, b in zip(step("cuda"), step("cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
