"""nn.functional.batch_norm / layer_norm and nn.BatchNorm1d, BatchNorm2d,
LayerNorm: gradients against central differences of the float64 oracle
and (second derivatives too) against torch; the modules' buffers,
state dicts, train/eval, momentum=None and device moves; the autocast
policy; PyTorch's errors; and a short AMP training run of a conv + BN +
ReLU model that follows torch's trajectory.  Every test that takes the
``device`` fixture also runs on CUDA where a GPU is usable.
"""
import numpy as np
import pytest

import ampc
import ampc.nn as nn
import ampc.nn.functional as F
import reference as ref
from cuda_helpers import device, requires_cuda  # noqa: F401 (a fixture)
from helpers import gradcheck, rand_values, to64, torch_or_skip


def put(values, dev="cpu", dtype=ampc.float32, requires_grad=False):
    t = ampc.tensor(np.asarray(values, dtype=np.float32)).to(dev)
    t = t.to(dtype)
    return t.requires_grad_(True) if requires_grad else t


# ----------------------------------------------------------------------------
# gradients


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (3, 4, 5)])
def test_batch_norm_gradients_match_differences(training, shape):
    rm = ref.round_to(np.linspace(-0.5, 0.5, shape[1]), "float32")
    rv = ref.round_to(np.linspace(0.5, 2.0, shape[1]), "float32")

    def ours(x, w, b):
        return F.batch_norm(x, ampc.tensor(rm.astype(np.float32)),
                            ampc.tensor(rv.astype(np.float32)), w, b,
                            training=training)

    def oracle(x, w, b):
        return ref.batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5)[0]

    gradcheck(ours, oracle, [shape, shape[1:2], shape[1:2]], rtol=2e-3,
              atol=2e-3)


@pytest.mark.parametrize("shape,ns", [((4, 7), (7,)), ((2, 3, 5), (3, 5))])
def test_layer_norm_gradients_match_differences(shape, ns):
    gradcheck(lambda x, w, b: F.layer_norm(x, ns, w, b),
              lambda x, w, b: ref.layer_norm(x, len(ns), w, b)[0],
              [shape, ns, ns], rtol=2e-3, atol=2e-3)


def _hvp(lib, f, values, v):
    """d/d(inputs) of <grad_x f, v> (a Hessian-vector product)."""
    ts = [lib.tensor(a, requires_grad=True) for a in values]
    gx = lib.autograd.grad(f(lib, *ts), ts[0], create_graph=True)[0]
    return [np.zeros(a.shape) if h is None else to64(h.detach())
            for a, h in zip(values, lib.autograd.grad(
                (gx * lib.tensor(v)).sum(), ts, allow_unused=True))]


SECOND_ORDER = {
    "batch_norm_train": lambda lib, x, w, b: (lib.nn.functional.batch_norm(
        x, None, None, w, b, training=True) ** 3 * x).sum(),
    "batch_norm_eval": lambda lib, x, w, b: (lib.nn.functional.batch_norm(
        x, lib.zeros(3) + 0.2, lib.ones(3) * 1.5, w, b) ** 3 * x).sum(),
    "layer_norm": lambda lib, x, w, b: (lib.nn.functional.layer_norm(
        x.reshape(4, 3), (3,), w, b) ** 3 * x.reshape(4, 3)).sum(),
}


@pytest.mark.parametrize("case", sorted(SECOND_ORDER))
def test_second_derivatives_match_torch(case):
    torch = torch_or_skip()
    rng = np.random.default_rng(len(case))
    values = [rng.uniform(-1.5, 1.5, s).astype(np.float32)
              for s in ((4, 3), (3,), (3,))]
    v = rng.uniform(-1.0, 1.0, (4, 3)).astype(np.float32)
    ours = _hvp(ampc, SECOND_ORDER[case], values, v)
    theirs = _hvp(torch, SECOND_ORDER[case], values, v)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a, t, rtol=2e-4,
                                   atol=2e-4 * np.abs(t).max())


# ----------------------------------------------------------------------------
# modules


def test_module_reprs_buffers_and_state_dict():
    bn = nn.BatchNorm2d(3)
    assert repr(bn) == ("BatchNorm2d(3, eps=1e-05, momentum=0.1, "
                        "affine=True, bias=True, track_running_stats=True)")
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean",
                                     "running_var", "num_batches_tracked"]
    assert bn.num_batches_tracked.dtype is ampc.int64
    assert [n for n, _ in bn.named_buffers()] == [
        "running_mean", "running_var", "num_batches_tracked"]
    free = nn.BatchNorm1d(4, affine=False, track_running_stats=False,
                          momentum=None)
    assert list(free.state_dict()) == [] and free.running_mean is None
    assert repr(nn.LayerNorm((3, 4), elementwise_affine=False)) == (
        "LayerNorm((3, 4), eps=1e-05, elementwise_affine=False, bias=False)")
    ln = nn.LayerNorm(5, bias=False)
    assert list(ln.state_dict()) == ["weight"] and ln.bias is None


def test_state_dict_round_trip_and_old_checkpoints(tmp_path):
    bn = nn.BatchNorm2d(4)
    for _ in range(3):
        bn(ampc.randn(3, 4, 5, 5))
    path = tmp_path / "bn.pt"
    ampc.save(bn.state_dict(), path)
    fresh = nn.BatchNorm2d(4)
    fresh.load_state_dict(ampc.load(path))
    for name, buf in bn.state_dict().items():
        assert to64(fresh.state_dict()[name]).tolist() == \
            to64(buf).tolist(), name
    assert int(fresh.num_batches_tracked.item()) == 3
    # a checkpoint from before num_batches_tracked existed still loads
    old = {k: v for k, v in bn.state_dict().items()
           if k != "num_batches_tracked"}
    nn.BatchNorm2d(4).load_state_dict(old)
    with pytest.raises(RuntimeError, match="Missing key"):
        nn.BatchNorm2d(4).load_state_dict({"weight": ampc.ones(4)})


def test_dtype_moves_keep_the_counter_int64():
    bn = nn.BatchNorm2d(3).half()
    assert bn.running_mean.dtype is ampc.float16
    assert bn.num_batches_tracked.dtype is ampc.int64
    bn.float()
    assert bn.running_var.dtype is ampc.float32


def test_train_and_eval(device, rng):
    x = rng.uniform(-2, 3, (6, 3, 4, 5))
    bn = nn.BatchNorm2d(3, momentum=0.5).to(device)
    y = bn(put(x, device))
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(to64(bn.running_mean.cpu()), 0.5 * mean,
                               rtol=1e-5)
    unbiased = var * 120 / 119
    np.testing.assert_allclose(to64(bn.running_var.cpu()),
                               0.5 + 0.5 * unbiased, rtol=1e-5)
    np.testing.assert_allclose(
        to64(y.cpu()), ref.batch_norm(x, None, None, None, None, True, 0.5,
                                      1e-5)[0], atol=1e-5)
    bn.eval()
    before = to64(bn.running_mean.cpu())
    y = bn(put(x, device))
    assert to64(bn.running_mean.cpu()).tolist() == before.tolist()
    assert int(bn.num_batches_tracked.item()) == 1
    rm, rv = to64(bn.running_mean.cpu()), to64(bn.running_var.cpu())
    np.testing.assert_allclose(
        to64(y.cpu()), ref.batch_norm(x, None, None, rm, rv, False, 0.5,
                                      1e-5)[0], atol=1e-5)
    # without running statistics, evaluation uses the batch's too
    free = nn.BatchNorm2d(3, track_running_stats=False).to(device).eval()
    np.testing.assert_allclose(
        to64(free(put(x, device)).cpu()),
        ref.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0],
        atol=1e-5)


def test_batch_norm_1d_shapes_and_layer_norm_module(device, rng):
    bn = nn.BatchNorm1d(5).to(device)
    for shape in ((7, 5), (3, 5, 4)):
        x = rng.uniform(-1, 1, shape)
        assert tuple(bn(put(x, device)).shape) == shape
    ln = nn.LayerNorm([4, 3]).to(device)
    x = rng.uniform(-1, 1, (2, 5, 4, 3))
    xt = put(x, device, requires_grad=True)
    ln(xt).sum().backward()
    assert tuple(ln.weight.grad.shape) == (4, 3)
    assert xt.grad.device.type == device


def test_modules_match_torch_over_steps():
    torch = torch_or_skip()
    rng = np.random.default_rng(7)
    for make in (lambda lib: lib.nn.BatchNorm2d(3, momentum=None),
                 lambda lib: lib.nn.BatchNorm1d(3, momentum=0.2)):
        ours, theirs = make(ampc), make(torch)
        shape = (4, 3, 2, 5) if isinstance(ours, nn.BatchNorm2d) else (6, 3)
        for _ in range(3):
            x = rng.standard_normal(shape).astype(np.float32) * 2 + 1
            ours(ampc.tensor(x))
            theirs(torch.tensor(x))
        for name, t in theirs.state_dict().items():
            np.testing.assert_allclose(to64(ours.state_dict()[name]),
                                       t.double().numpy(), rtol=1e-5,
                                       err_msg=name)


# ----------------------------------------------------------------------------
# autocast


@pytest.mark.parametrize("low", [ampc.bfloat16, ampc.float16])
def test_cpu_autocast_runs_in_the_input_dtype(low):
    with ampc.autocast("cpu", dtype=low):
        h = nn.Linear(6, 4)(ampc.randn(5, 6))
        assert F.layer_norm(h, (4,), ampc.ones(4), ampc.zeros(4)).dtype \
            is low
        assert F.layer_norm(ampc.randn(5, 4), (4,)).dtype is ampc.float32
        c = nn.Conv2d(3, 4, 3)(ampc.randn(2, 3, 6, 6))
        bn = nn.BatchNorm2d(4)
        assert bn(c).dtype is low and bn.running_mean.dtype is ampc.float32
    assert ampc._C.autocast_policy("layer_norm", "cpu") is None
    assert ampc._C.autocast_policy("layer_norm", "cuda") == "fp32"
    assert ampc._C.autocast_policy("batch_norm", "cuda") is None


@pytest.mark.cuda
@requires_cuda
def test_cuda_autocast_layer_norm_in_float32():
    x = ampc.randn(4, 8, device="cuda").half()
    ln = nn.LayerNorm(8).cuda()
    with ampc.autocast("cuda", dtype=ampc.float16):
        assert ln(x).dtype is ampc.float32
        bn = nn.BatchNorm1d(8).cuda()
        assert bn(x).dtype is ampc.float16


@pytest.mark.cuda
@requires_cuda
def test_cuda_layer_norm_parameter_gradients_past_the_grid_limit():
    """More than 65535 chunks of 64 rows: the weight and bias gradients'
    partial sums take the chunks beyond gridDim.y in turn."""
    rows = 65535 * 64 + 3
    x = ampc.tensor(np.tile(np.float32([-1.0, 1.0]), (rows, 1)),
                    device="cuda")
    w = ampc.ones(2, device="cuda", requires_grad=True)
    b = ampc.zeros(2, device="cuda", requires_grad=True)
    F.layer_norm(x, (2,), w, b, eps=0.0).sum().backward()
    # every row normalises to (-1, 1): dw = rows * (-1, 1), db = rows
    np.testing.assert_array_equal(to64(w.grad.cpu()), [-rows, rows])
    np.testing.assert_array_equal(to64(b.grad.cpu()), [rows, rows])


# ----------------------------------------------------------------------------
# errors


def _raises(exc, match, fn):
    with pytest.raises(exc, match=match):
        fn()


def test_batch_norm_errors():
    x = ampc.randn(4, 3, 5)
    rm, rv = ampc.zeros(3), ampc.ones(3)
    _raises(ValueError, r"expected 2D or 3D input \(got 4D input\)",
            lambda: nn.BatchNorm1d(3)(ampc.randn(2, 3, 4, 5)))
    _raises(ValueError, r"expected 4D input \(got 3D input\)",
            lambda: nn.BatchNorm2d(3)(x))
    _raises(RuntimeError, r"batch_norm\(\): running_mean should contain 3 "
            r"elements \(one per channel of input\), not 4",
            lambda: F.batch_norm(x, ampc.zeros(4), rv, training=True))
    _raises(RuntimeError, r"weight should contain 3 elements",
            lambda: F.batch_norm(x, rm, rv, ampc.ones(4)))
    _raises(ValueError, r"Expected more than 1 value per channel when "
            r"training, got input size",
            lambda: F.batch_norm(ampc.randn(1, 3), rm, rv, training=True))
    _raises(RuntimeError, r"expected input to have 2 or more dimensions",
            lambda: F.batch_norm(ampc.randn(4), ampc.zeros(4), ampc.ones(4)))
    _raises(RuntimeError, r"running_mean must be defined in evaluation mode",
            lambda: F.batch_norm(x, None, None))
    _raises(RuntimeError, r"expected weight to have dtype float32 \(the "
            r"input's\), got float16",
            lambda: F.batch_norm(x, rm, rv, ampc.ones(3).half()))
    _raises(RuntimeError, r"expected running_mean to have dtype bfloat16 "
            r"\(the same as weight\), got float32",
            lambda: F.batch_norm(x.bfloat16(), rm, rv,
                                 ampc.ones(3).bfloat16()))
    _raises(RuntimeError, r"expected weight to have dtype bfloat16 \(the "
            r"input's\) or float32, got float16",
            lambda: F.batch_norm(x.bfloat16(), rm, rv, ampc.ones(3).half()))
    _raises(RuntimeError, r"batch_norm\(\): expected input to have a "
            r"floating-point dtype",
            lambda: F.batch_norm(ampc.ones(4, 3, dtype=ampc.int64), rm, rv))
    _raises(ValueError, r"eps must be positive during training",
            lambda: F.batch_norm(x, rm, rv, training=True, eps=0.0))
    _raises(TypeError, r"batch_norm\(\): argument 'momentum' must be a "
            r"number", lambda: F.batch_norm(x, rm, rv, momentum=None))
    _raises(TypeError, r"argument 'weight' \(position 4\) must be Tensor",
            lambda: F.batch_norm(x, rm, rv, [1.0, 1.0, 1.0]))


def test_layer_norm_errors():
    x = ampc.randn(4, 3, 5)
    _raises(RuntimeError, r"layer_norm\(\): Given normalized_shape=\[4\], "
            r"expected input with shape \[\*, 4\], but got input of "
            r"size\[4, 3, 5\]", lambda: F.layer_norm(x, (4,)))
    _raises(RuntimeError, r"Expected weight to be of same shape as "
            r"normalized_shape, but got weight of shape \[4\] and "
            r"normalized_shape = \[5\]",
            lambda: F.layer_norm(x, (5,), ampc.ones(4)))
    _raises(RuntimeError, r"Expected bias to be of same shape",
            lambda: F.layer_norm(x, (5,), None, ampc.ones(4)))
    _raises(RuntimeError, r"Expected normalized_shape to be at least "
            r"1-dimensional", lambda: F.layer_norm(x, ()))
    _raises(TypeError, r"'normalized_shape' \(position 2\) must be tuple of "
            r"ints, not int", lambda: F.layer_norm(x, 5))
    _raises(RuntimeError, r"expected weight to have dtype float32 \(the "
            r"input's\), got bfloat16",
            lambda: F.layer_norm(x, (5,), ampc.ones(5).bfloat16()))
    _raises(RuntimeError, r"expected input to have a floating-point dtype",
            lambda: F.layer_norm(ampc.ones(2, 5, dtype=ampc.int64), (5,)))


def test_messages_share_torchs_words():
    """Where PyTorch has a message for the same mistake, ours contains its
    words (after ampc's op prefix)."""
    torch = torch_or_skip()
    import torch.nn.functional as TF
    cases = [
        lambda lib, f: f.layer_norm(lib.ones(4, 3, 5), (4,)),
        lambda lib, f: f.layer_norm(lib.ones(4, 3, 5), (5,), lib.ones(4)),
        lambda lib, f: f.batch_norm(lib.ones(1, 3), lib.zeros(3),
                                    lib.ones(3), training=True),
        lambda lib, f: lib.nn.BatchNorm2d(3)(lib.ones(2, 3, 4)),
    ]
    for case in cases:
        with pytest.raises(Exception) as theirs:
            case(torch, TF)
        with pytest.raises(type(theirs.value)) as ours:
            case(ampc, F)
        words = str(theirs.value).split("torch.Size")[0]
        assert words in str(ours.value)


@pytest.mark.cuda
@requires_cuda
def test_device_mismatch_is_refused():
    x = ampc.randn(4, 3, device="cuda")
    with pytest.raises(RuntimeError, match="batch_norm"):
        F.batch_norm(x, ampc.zeros(3), ampc.ones(3))
    with pytest.raises(RuntimeError, match="layer_norm"):
        F.layer_norm(x, (3,), ampc.ones(3))


# ----------------------------------------------------------------------------
# training with AMP


def _model(lib, params):
    m = lib.nn.Sequential(lib.nn.Conv2d(3, 6, 3, padding=1),
                          lib.nn.BatchNorm2d(6), lib.nn.ReLU(),
                          lib.nn.Flatten(), lib.nn.Linear(6 * 5 * 5, 4))
    with lib.no_grad():
        for p, v in zip(m.parameters(), params):
            p.copy_(lib.tensor(v))
    return m


def _train(lib, params, data, steps=4):
    model = _model(lib, params)
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=256.0)
    losses = []
    for x, y in data[:steps]:
        opt.zero_grad()
        with lib.autocast("cpu", dtype=lib.float16):
            loss = lib.nn.functional.cross_entropy(model(lib.tensor(x)),
                                                   lib.tensor(y))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    bn = model[1]
    return losses, [to64(p.detach()) for p in model.parameters()], \
        to64(bn.running_var)


def test_amp_training_follows_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    shapes = [(6, 3, 3, 3), (6,), (6,), (6,), (4, 150), (4,)]
    params = [rng.standard_normal(s).astype(np.float32) * 0.3
              for s in shapes]
    params[2] = np.ones(6, np.float32)
    # one batch, fitted for four steps (the loss must fall)
    data = [(rng.standard_normal((8, 3, 5, 5)).astype(np.float32),
             rng.integers(0, 4, 8))] * 4
    ours = _train(ampc, params, data)
    theirs = _train(torch, params, data)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=2e-2)
    for a, t in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, t, rtol=3e-2, atol=3e-3)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-2)
    assert ours[0][-1] < ours[0][0]


def test_reference_helpers_agree():
    """The oracle's batch norm of (N, C) equals its layer norm of the
    transpose (one statistic per column either way)."""
    x = rand_values((6, 4), "float32", np.random.default_rng(0))
    a = ref.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[0]
    b = ref.layer_norm(x.T.copy(), 1)[0].T
    np.testing.assert_allclose(a, b, rtol=1e-12)
