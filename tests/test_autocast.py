"""ampc.autocast: construction, enter/exit, nesting, threads, decorator use,
the per-device op policy, the weight-cast cache, and gradients through the
casts (amp_semantics.md section 3).  Where torch is installed, output dtypes
are compared op by op with torch.autocast("cpu")."""
import threading
import warnings

import numpy as np
import pytest

import ampc
from cuda_helpers import requires_cuda
import ampc.nn.functional as F


def torch_or_skip():
    return pytest.importorskip("torch")


# ----------------------------------------------------------------------------
# construction


def test_defaults_per_device():
    assert ampc.get_autocast_dtype("cpu") is ampc.bfloat16
    assert ampc.get_autocast_dtype("cuda") is ampc.float16
    assert ampc.is_autocast_enabled("cpu") is False
    assert ampc.is_autocast_enabled() is False      # no argument: cuda
    ctx = ampc.autocast("cpu")
    assert (ctx.device, ctx.fast_dtype, ctx._enabled) == (
        "cpu", ampc.bfloat16, True)


def test_same_object_everywhere():
    assert ampc.amp.autocast is ampc.autocast


def test_device_keyword_gets_a_clear_error():
    with pytest.raises(TypeError, match="device_type="):
        ampc.autocast(device="cuda")


def test_device_type_must_be_a_string():
    with pytest.raises(ValueError, match="Expected `device_type` of type"):
        ampc.autocast(ampc.device("cpu"))


def test_unknown_and_unsupported_device_types():
    with pytest.raises(RuntimeError, match="Invalid device string"):
        ampc.autocast("not a real device")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ampc.autocast("xpu")


@pytest.mark.parametrize("dtype", [ampc.int64, ampc.bool])
def test_non_floating_dtype_is_an_error(dtype):
    with pytest.raises(TypeError, match="floating point dtype"):
        ampc.autocast("cpu", dtype=dtype)


def test_dtype_must_be_a_dtype():
    with pytest.raises(TypeError, match="ampc.dtype"):
        ampc.autocast("cpu", dtype="float16")


def test_float32_on_cpu_warns_and_disables():
    with pytest.warns(UserWarning, match="In CPU autocast, but the target"):
        ctx = ampc.autocast("cpu", dtype=ampc.float32)
    assert ctx._enabled is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ampc.autocast("cpu", dtype=ampc.float32, enabled=False)


@pytest.mark.skipif(ampc.cuda.is_available(), reason="needs no GPU")
def test_cuda_without_a_gpu_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = ampc.autocast("cuda")
    assert ctx._enabled is False
    with ctx:
        assert ampc.is_autocast_enabled("cuda") is False


def test_old_spellings_warn():
    with pytest.warns(FutureWarning, match=r"ampc.amp.autocast\('cpu'"):
        ctx = ampc.cpu.amp.autocast(dtype=ampc.float16)
    assert (ctx.device, ctx.fast_dtype) == ("cpu", ampc.float16)
    with pytest.warns(FutureWarning, match=r"ampc.amp.autocast\('cuda'"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ctx = ampc.cuda.amp.autocast()
    assert ctx.device == "cuda"
    with pytest.warns(FutureWarning, match=r"GradScaler\('cpu'"):
        scaler = ampc.cpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(scaler, ampc.amp.GradScaler)
    assert scaler.get_scale() == 8.0 and scaler.is_enabled()


# ----------------------------------------------------------------------------
# enter, exit, nesting


def test_enter_sets_and_exit_restores():
    with ampc.autocast("cpu", dtype=ampc.float16) as ctx:
        assert isinstance(ctx, ampc.autocast)
        assert ampc.is_autocast_enabled("cpu")
        assert ampc.get_autocast_dtype("cpu") is ampc.float16
        assert not ampc.is_autocast_enabled("cuda")
    assert not ampc.is_autocast_enabled("cpu")
    assert ampc.get_autocast_dtype("cpu") is ampc.bfloat16


def test_nesting_and_disabled_regions():
    with ampc.autocast("cpu", dtype=ampc.float16):
        with ampc.autocast("cpu", enabled=False):
            assert not ampc.is_autocast_enabled("cpu")
            # an inner context without a dtype keeps the outer one
            assert ampc.get_autocast_dtype("cpu") is ampc.float16
            with ampc.autocast("cpu", dtype=ampc.bfloat16):
                assert ampc.is_autocast_enabled("cpu")
                assert ampc.get_autocast_dtype("cpu") is ampc.bfloat16
            assert not ampc.is_autocast_enabled("cpu")
        assert ampc.is_autocast_enabled("cpu")
        assert ampc.get_autocast_dtype("cpu") is ampc.float16


def test_exception_inside_restores_state():
    with pytest.raises(KeyError):
        with ampc.autocast("cpu"):
            raise KeyError("boom")
    assert not ampc.is_autocast_enabled("cpu")


def test_exit_without_enter_is_an_error():
    with pytest.raises(RuntimeError, match="without a matching"):
        ampc.autocast("cpu").__exit__(None, None, None)


def test_decorator_function_and_method():
    @ampc.autocast("cpu", dtype=ampc.float16)
    def f(x):
        """doc of f"""
        return ampc.is_autocast_enabled("cpu"), ampc.get_autocast_dtype("cpu")

    assert f(1) == (True, ampc.float16)
    assert f.__name__ == "f" and f.__doc__ == "doc of f"
    assert not ampc.is_autocast_enabled("cpu")

    class M:
        @ampc.autocast("cpu")
        def forward(self, x):
            return self, ampc.is_autocast_enabled("cpu")

    m = M()
    assert m.forward(0) == (m, True)


def test_decorator_restores_on_exception():
    @ampc.autocast("cpu")
    def boom():
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        boom()
    assert not ampc.is_autocast_enabled("cpu")


def test_same_instance_reentrant():
    ctx = ampc.autocast("cpu")

    @ctx
    def depth(n):
        return ampc.is_autocast_enabled("cpu") if n == 0 else depth(n - 1)

    assert depth(5) is True
    assert not ampc.is_autocast_enabled("cpu")


def test_threads_do_not_see_each_others_state():
    seen = {}
    ready, done = threading.Event(), threading.Event()

    def other():
        ready.wait()
        seen["other"] = ampc.is_autocast_enabled("cpu")
        with ampc.autocast("cpu", dtype=ampc.float16):
            seen["inner"] = ampc.get_autocast_dtype("cpu")
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with ampc.autocast("cpu"):
        ready.set()
        done.wait()
        assert ampc.get_autocast_dtype("cpu") is ampc.bfloat16
    t.join()
    assert seen == {"other": False, "inner": ampc.float16}


# ----------------------------------------------------------------------------
# the policy

# amp_semantics.md section 3.8, for the ops ampc has
EXPECTED_POLICY = {
    "conv1d": ("lower", "lower"),
    "conv2d": ("lower", "lower"), "linear": ("lower", "lower"),
    "conv_transpose2d": ("lower", "lower"),
    "matmul": ("lower", "lower"), "mm": ("lower", "lower"),
    "bmm": ("lower", "lower"), "prelu": ("lower", "lower"),
    "addmm": ("lower", "lower"),
    "prod": ("fp32", "fp32"), "logsumexp": (None, "fp32"),
    "cosine_similarity": (None, "fp32"),
    "scaled_dot_product_attention": ("lower", "lower"),
    "lstm": ("lower", "lower"), "rnn_tanh": ("lower", "lower"),
    "rnn_relu": ("lower", "lower"), "gru": (None, "lower"),
    "rnn_tanh_cell": ("lower", "lower"), "rnn_relu_cell": ("lower", "lower"),
    "lstm_cell": (None, "lower"), "gru_cell": (None, "lower"),
    "cross_entropy": ("fp32", "fp32"), "nll_loss": ("fp32", "fp32"),
    "mse_loss": ("fp32", "fp32"),
    "binary_cross_entropy_with_logits": ("fp32", "fp32"),
    "binary_cross_entropy": ("fp32", "banned"),
    "l1_loss": ("fp32", "fp32"), "smooth_l1_loss": ("fp32", "fp32"),
    "huber_loss": ("fp32", "fp32"), "kl_div": ("fp32", "fp32"),
    "softmax": (None, "fp32"), "log_softmax": (None, "fp32"),
    "sum": (None, "fp32"), "exp": (None, "fp32"), "log": (None, "fp32"),
    "cumsum": (None, "fp32"), "cumprod": (None, "fp32"),
    "log1p": (None, "fp32"), "log2": (None, "fp32"),
    "log10": (None, "fp32"), "expm1": (None, "fp32"),
    "tan": (None, "fp32"), "asin": (None, "fp32"), "acos": (None, "fp32"),
    "sinh": (None, "fp32"), "cosh": (None, "fp32"),
    "atan2": (None, "promote"),
    "pow": (None, "fp32"), "rsqrt": (None, "fp32"),
    "softplus": (None, "fp32"),
    "reciprocal": (None, "fp32"), "layer_norm": (None, "fp32"),
    "group_norm": (None, "fp32"), "upsample": (None, "fp32"),
    "upsample_bicubic": (None, "fp32"), "upsample_trilinear": (None, "fp32"),
    "reflection_pad": ("fp32", None), "replication_pad": ("fp32", None),
    "cat": ("promote", None), "stack": ("promote", None),
    # torch 2.13 lists these on CUDA only (its CPU lists have none of
    # embedding_bag, adaptive_max_pool2d, cummax, histc or the norms)
    "linalg_vector_norm": (None, "fp32"),
    "linalg_matrix_norm": (None, "fp32"), "norm": (None, "fp32"),
    "cross": (None, "promote"),
}


def test_policy_table_is_pytorchs():
    assert sorted(ampc._C.autocast_ops()) == sorted(EXPECTED_POLICY)
    for op, (cpu, cuda) in EXPECTED_POLICY.items():
        assert ampc._C.autocast_policy(op, "cpu") == cpu, op
        assert ampc._C.autocast_policy(op, "cuda") == cuda, op
    assert ampc._C.autocast_policy("relu", "cpu") is None


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = ampc.tensor(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
    w = ampc.tensor(rng.standard_normal((5, 3, 3, 3)).astype(np.float32))
    a = ampc.tensor(rng.standard_normal((4, 7)).astype(np.float32))
    lw = ampc.tensor(rng.standard_normal((5, 7)).astype(np.float32))
    target = ampc.tensor(rng.integers(0, 5, 4))
    return x, w, a, lw, target


def _op_cases():
    """(name, fn(ampc-or-torch module, functional, tensors)) per op."""
    return [
        ("conv2d", lambda m, f, t: f.conv2d(t["x"], t["w"], padding=1)),
        ("linear", lambda m, f, t: f.linear(t["a"], t["lw"])),
        ("matmul", lambda m, f, t: m.matmul(t["a"], t["lw"].t())),
        ("@", lambda m, f, t: t["a"] @ t["lw"].t()),
        ("relu after linear", lambda m, f, t: f.relu(f.linear(t["a"], t["lw"]))),
        ("cross_entropy", lambda m, f, t: f.cross_entropy(
            f.linear(t["a"], t["lw"]), t["target"])),
        ("mse_loss", lambda m, f, t: f.mse_loss(
            f.linear(t["a"], t["lw"]), t["a"][:, :5])),
        ("softmax", lambda m, f, t: f.softmax(f.linear(t["a"], t["lw"]), 1)),
        ("log_softmax", lambda m, f, t: f.log_softmax(t["a"].half(), 1)),
        ("sum", lambda m, f, t: t["a"].half().sum()),
        ("exp", lambda m, f, t: t["a"].half().exp()),
        # promote: float32 first makes everything float32 (the other
        # order raises in PyTorch and in ampc: see the test below)
        ("cat", lambda m, f, t: m.cat([t["a"], t["a"].half()])),
        ("stack", lambda m, f, t: m.stack([t["a"], t["a"]])),
        ("add mixed", lambda m, f, t: t["a"].half() + t["a"]),
        ("max_pool2d", lambda m, f, t: f.max_pool2d(
            f.conv2d(t["x"], t["w"], padding=1), 2)),
        ("layer_norm", lambda m, f, t: f.layer_norm(
            f.linear(t["a"], t["lw"]), (5,), m.ones(5), m.zeros(5))),
        ("batch_norm", lambda m, f, t: f.batch_norm(
            f.conv2d(t["x"], t["w"], padding=1), m.zeros(5), m.ones(5),
            m.ones(5), m.zeros(5), training=True)),
    ]


EXPECTED_CPU_DTYPES = {
    "conv2d": "low", "linear": "low", "matmul": "low", "@": "low",
    "relu after linear": "low", "cross_entropy": "float32",
    "mse_loss": "float32", "softmax": "low", "log_softmax": "float16",
    "sum": "float16", "exp": "float16", "cat": "float32",
    "stack": "float32", "add mixed": "float32", "max_pool2d": "low",
    "layer_norm": "low", "batch_norm": "low",
}


@pytest.mark.parametrize("low", [ampc.bfloat16, ampc.float16],
                         ids=["bf16", "fp16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cpu_output_dtypes(name, fn, low):
    x, w, a, lw, target = _inputs()
    t = dict(x=x, w=w, a=a, lw=lw, target=target)
    with ampc.autocast("cpu", dtype=low):
        out = fn(ampc, F, t)
    want = EXPECTED_CPU_DTYPES[name]
    assert out.dtype is (low if want == "low" else getattr(ampc, want))


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,fn", _op_cases(),
                         ids=[name for name, _ in _op_cases()])
def test_cpu_output_dtypes_match_torch(name, fn, low):
    torch = torch_or_skip()
    import torch.nn.functional as TF
    arrays = [v.numpy() for v in _inputs()]
    ours = dict(zip(["x", "w", "a", "lw", "target"],
                    [ampc.tensor(v) for v in arrays]))
    theirs = dict(zip(["x", "w", "a", "lw", "target"],
                      [torch.tensor(v) for v in arrays]))
    with ampc.autocast("cpu", dtype=getattr(ampc, low)):
        out = fn(ampc, F, ours)
    with torch.autocast("cpu", dtype=getattr(torch, low)):
        ref = fn(torch, TF, theirs)
    assert str(out.dtype).split(".")[1] == str(ref.dtype).split(".")[1]


def test_autocast_result_equals_manual_cast():
    # PyTorch's harness: the autocast output is bitwise the op on inputs
    # cast by hand
    x, w, a, lw, target = _inputs(1)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        got = F.linear(a, lw)
    want = F.linear(a.bfloat16(), lw.bfloat16())
    assert np.array_equal(got.float().numpy(), want.float().numpy())


def test_integer_inputs_are_never_cast():
    idx = ampc.tensor([[1, 2], [3, 4]])
    with ampc.autocast("cpu"):
        out = ampc.cat([idx, idx])
    assert out.dtype is ampc.int64


def test_in_place_ops_are_not_autocast():
    a = ampc.ones(3)
    with ampc.autocast("cpu"):
        a.add_(1.0)
    assert a.dtype is ampc.float32


def test_promote_rejects_the_other_16_bit_type():
    # PyTorch's prioritize(): folding in argument order, a 16-bit input of
    # the other type is an error unless a float32 input came first
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        with pytest.raises(RuntimeError, match="Unexpected floating"):
            ampc.cat([ampc.ones(2).half(), ampc.ones(2)])
        assert ampc.cat([ampc.ones(2), ampc.ones(2).half()]).dtype is \
            ampc.float32


# ----------------------------------------------------------------------------
# gradients and the cast cache


def test_gradients_flow_back_in_float32():
    x, w, a, lw, target = _inputs(2)
    lw.requires_grad_()
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        loss = F.cross_entropy(F.linear(a, lw), target)
    assert loss.dtype is ampc.float32
    loss.backward()
    assert lw.grad.dtype is ampc.float32
    # the same gradient as the by-hand casts
    lw2 = ampc.tensor(lw.detach().numpy(), requires_grad=True)
    F.cross_entropy(F.linear(a.bfloat16(), lw2.bfloat16()).float(),
                    target).backward()
    assert np.array_equal(lw.grad.numpy(), lw2.grad.numpy())


def test_backward_is_not_affected_by_the_context():
    x, w, a, lw, target = _inputs(3)
    grads = []
    for inside in (False, True):
        p = ampc.tensor(lw.numpy(), requires_grad=True)
        with ampc.autocast("cpu"):
            loss = F.linear(a, p).float().sum()
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        grads.append(p.grad.numpy())
    assert np.array_equal(grads[0], grads[1])


def test_cache_reuses_one_cast_per_weight_within_a_context():
    x, w, a, lw, target = _inputs(4)
    lw.requires_grad_()
    with ampc.autocast("cpu"):
        F.linear(a, lw)
        assert ampc._C._autocast_cache_size() == 1
        F.linear(a, lw)
        with ampc.autocast("cpu"):      # nested: same cache
            F.linear(a, lw)
        assert ampc._C._autocast_cache_size() == 1
    assert ampc._C._autocast_cache_size() == 0     # freed at exit
    with ampc.autocast("cpu"):
        F.linear(a, lw)
        assert ampc._C._autocast_cache_size() == 1


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=[pytest.mark.cuda, requires_cuda])])
def test_autocast_cache_info_counts_the_cached_casts(device):
    ampc.manual_seed(0)
    model = ampc.nn.Sequential(ampc.nn.Linear(33, 17),
                               ampc.nn.Linear(17, 5)).to(device)
    x = ampc.randn(3, 33).to(device)
    dtype = ampc.float16
    where = "cpu" if device == "cpu" else "cuda:0"
    with ampc.autocast(device, dtype=dtype):
        model(x)
        info = ampc.amp.autocast_cache_info()
        params = sum(p.numel() for p in model.parameters())
        assert info == (4, 2 * params, {where: 2 * params})
        model(x)                    # the same casts serve again
        assert ampc.amp.autocast_cache_info() == info
    assert ampc.amp.autocast_cache_info() == (0, 0, {})
    with ampc.autocast(device, dtype=dtype, cache_enabled=False):
        model(x)
        assert ampc.amp.autocast_cache_info().entries == 0


def test_cache_gives_one_grad_path_per_weight():
    x, w, a, lw, target = _inputs(5)
    lw.requires_grad_()
    with ampc.autocast("cpu"):
        loss = (F.linear(a, lw).float().sum() +
                F.linear(a, lw).float().sum())
    loss.backward()
    with ampc.autocast("cpu"):
        one = F.linear(a, lw.detach()).float()
    assert lw.grad.dtype is ampc.float32
    assert ampc._C._autocast_cache_size() == 0
    assert one.shape == (4, 5)


@pytest.mark.parametrize("case", ["no_grad", "cache_disabled", "no_grad_req",
                                  "view", "non_leaf"])
def test_what_is_not_cached(case):
    x, w, a, lw, target = _inputs(6)
    lw.requires_grad_()
    weight = lw
    ctx = ampc.autocast("cpu", cache_enabled=case != "cache_disabled")
    with ctx:
        if case == "no_grad":
            with ampc.no_grad():
                F.linear(a, weight)
        else:
            if case == "no_grad_req":
                weight = lw.detach()
            elif case == "view":
                weight = lw[:, :]
            elif case == "non_leaf":
                weight = lw * 1.0
            F.linear(a, weight)
        assert ampc._C._autocast_cache_size() == 0


def test_cache_memory_stays_flat_under_no_grad():
    x, w, a, lw, target = _inputs(7)
    lw.requires_grad_()
    with ampc.autocast("cpu"):
        with ampc.no_grad():
            F.linear(a, lw)
            before = ampc.memory_allocated()
            for _ in range(50):
                F.linear(a, lw)
            assert ampc.memory_allocated() == before
