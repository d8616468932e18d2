"""Autocast for users' own code: ``custom_fwd`` / ``custom_bwd`` on custom
autograd Functions (PyTorch's semantics, compared with torch where it is
installed) and ``register_op``'s three policies, their gradients and their
error notes."""
import collections
import functools
import types
import warnings

import numpy as np
import pytest

import ampc
import reference as ref
from helpers import assert_close, to64, to_torch, torch_or_skip

from ampc.amp import custom_bwd, custom_fwd, register_op


def _seen():
    """What the decorated forward/backward observed, filled as they run."""
    return {}


def make_matmul_fn(cast_inputs, seen, device_type="cpu"):
    """A custom Function ``x @ w`` whose forward and backward record the
    autocast state and dtypes they ran under."""
    class MatMul(ampc.autograd.Function):
        @staticmethod
        @custom_fwd(device_type=device_type, cast_inputs=cast_inputs)
        def forward(ctx, x, w):
            seen["fwd"] = (ampc.is_autocast_enabled("cpu"), x.dtype, w.dtype)
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        @custom_bwd(device_type=device_type)
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            seen["bwd"] = (ampc.is_autocast_enabled("cpu"),
                           ampc.get_autocast_dtype("cpu"), g.dtype)
            return g @ w.t(), x.t() @ g
    return MatMul


def _leaves(rng, dtype=ampc.float32, shapes=((5, 7), (7, 3))):
    vals = [ref.round_to(rng.uniform(-1, 1, s), dtype.name) for s in shapes]
    return vals, [ampc.tensor(v.astype(np.float32)).to(dtype)
                  .requires_grad_() for v in vals]


# ----------------------------------------------------------------------------
# custom_fwd / custom_bwd


def test_custom_fwd_without_cast_runs_both_passes_under_forwards_autocast(
        rng):
    seen = _seen()
    fn = make_matmul_fn(None, seen)
    vals, (x, w) = _leaves(rng)
    with ampc.autocast("cpu", dtype=ampc.float16):
        out = fn.apply(x, w)
    # the matmul inside forward autocasts; backward, called outside the
    # region, runs under the forward's state
    assert out.dtype is ampc.float16
    assert seen["fwd"] == (True, ampc.float32, ampc.float32)
    out.float().sum().backward()
    assert seen["bwd"][:2] == (True, ampc.float16)
    assert not ampc.is_autocast_enabled("cpu")
    # gradients reach the float32 leaves in float32, with values of the
    # float16 products (g @ w.t() computed under autocast)
    assert x.grad.dtype is ampc.float32 and w.grad.dtype is ampc.float32
    g = np.ones((5, 3))
    assert_close(x.grad, g @ ref.round_to(vals[1], "float16").T,
                 "float16", k=7)
    assert_close(w.grad, ref.round_to(vals[0], "float16").T @ g,
                 "float16", k=5)


def test_custom_fwd_cast_inputs_casts_and_turns_autocast_off(rng):
    seen = _seen()
    fn = make_matmul_fn(ampc.float32, seen)
    vals, (x, w) = _leaves(rng, ampc.bfloat16)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = fn.apply(x, w)
    assert seen["fwd"] == (False, ampc.float32, ampc.float32)
    assert out.dtype is ampc.float32
    assert_close(out, vals[0] @ vals[1], "float32", k=7)
    out.sum().backward()
    # backward runs with autocast off (forward had it off), and each
    # gradient returns to its leaf's dtype
    assert seen["bwd"] == (False, ampc.bfloat16, ampc.float32)
    assert x.grad.dtype is ampc.bfloat16 and w.grad.dtype is ampc.bfloat16
    assert_close(x.grad, np.ones((5, 3)) @ vals[1].T, "bfloat16", k=7)
    assert_close(w.grad, vals[0].T @ np.ones((5, 3)), "bfloat16", k=5)


def test_custom_fwd_outside_autocast_changes_nothing(rng):
    seen = _seen()
    fn = make_matmul_fn(ampc.float32, seen)
    _, (x, w) = _leaves(rng, ampc.bfloat16)
    out = fn.apply(x, w)
    assert seen["fwd"] == (False, ampc.bfloat16, ampc.bfloat16)
    assert out.dtype is ampc.bfloat16


def test_custom_fwd_for_another_device_type_does_not_cast(rng):
    seen = _seen()
    fn = make_matmul_fn(ampc.float32, seen, device_type="cuda")
    _, (x, w) = _leaves(rng, ampc.bfloat16)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        fn.apply(x, w)
    # cuda autocast is off: forward keeps the cpu region's state and dtypes
    assert seen["fwd"] == (True, ampc.bfloat16, ampc.bfloat16)


def test_custom_fwd_casts_inside_containers_and_skips_the_rest():
    seen = {}

    class Fn(ampc.autograd.Function):
        @staticmethod
        @custom_fwd(device_type="cpu", cast_inputs=ampc.float16)
        def forward(ctx, pair, table, idx, label):
            seen["pair"] = tuple(t.dtype for t in pair)
            seen["table"] = {k: v.dtype for k, v in table.items()}
            seen["idx"], seen["label"] = idx.dtype, label
            return pair[0] + pair[1]

    a = ampc.ones(2, requires_grad=True)
    with ampc.autocast("cpu"):
        out = Fn.apply([a, ampc.ones(2)], {"k": ampc.zeros(2)},
                       ampc.arange(2), "name")
    assert seen == {"pair": (ampc.float16, ampc.float16),
                    "table": {"k": ampc.float16}, "idx": ampc.int64,
                    "label": "name"}
    assert out.dtype is ampc.float16


@pytest.mark.parametrize("wrap", ["custom_fwd", "register_op"])
def test_other_iterables_pass_through_and_named_tuples_keep_their_type(
        wrap):
    """A module, a range and a named tuple as arguments: the first two
    arrive unchanged (PyTorch's _cast would hand over a generator), the
    named tuple keeps its type with its tensors cast."""
    Pair = collections.namedtuple("Pair", "x y")
    seen = {}

    def body(ctx, pair, layers, steps):
        seen.update(pair=pair, layers=layers, steps=steps)
        return layers(pair.x + pair.y)

    if wrap == "custom_fwd":
        fwd = custom_fwd(device_type="cpu", cast_inputs=ampc.float32)(body)
        fn = functools.partial(fwd, types.SimpleNamespace())   # a ctx
    else:
        fn = functools.partial(ampc.amp.register_op(body, policy="fp32"),
                               None)
    layers = ampc.nn.Sequential(ampc.nn.ReLU())
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = fn(Pair(ampc.ones(2).bfloat16(), ampc.ones(2)), layers,
                 range(3))
    assert type(seen["pair"]) is Pair
    assert seen["pair"].x.dtype is ampc.float32
    assert seen["layers"] is layers and seen["steps"] == range(3)
    assert out.dtype is ampc.float32


@pytest.mark.parametrize("deco", [custom_fwd, custom_bwd])
def test_device_type_must_be_a_string(deco):
    with pytest.raises(ValueError,
                       match="Expected `device_type` of type `str`, got: "
                             r"`<class 'ampc\.[\w.]*device'>`"):
        deco(lambda ctx: None, device_type=ampc.device("cpu"))


def test_custom_bwd_without_custom_fwd_says_what_to_decorate():
    class Fn(ampc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 2

    x = ampc.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"not decorated with custom_fwd"
                       r".*@ampc\.amp\.custom_fwd\(device_type='cpu'\)"):
        Fn.apply(x).sum().backward()


def test_cuda_amp_spellings_warn_and_forward_to_amp():
    with pytest.warns(FutureWarning,
                      match=r"`ampc\.cuda\.amp\.custom_fwd\(args\.\.\.\)` is "
                            "deprecated"):
        fwd = ampc.cuda.amp.custom_fwd(lambda ctx, x: x,
                                       cast_inputs=ampc.float32)
    with pytest.warns(FutureWarning, match="custom_bwd"):
        bwd = ampc.cuda.amp.custom_bwd(lambda ctx, g: g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ampc.autocast("cpu"):    # a cuda decorator ignores cpu autocast
            x = ampc.ones(2, dtype=ampc.bfloat16)

            class Ctx:
                pass
            ctx = Ctx()
            assert fwd(ctx, x) is x
            assert ctx._fwd_used_autocast is False
            assert bwd(ctx, x) is x


def test_custom_fwd_matches_torch(rng):
    torch = torch_or_skip()
    tamp = torch.amp

    class TMatMul(torch.autograd.Function):
        @staticmethod
        @tamp.custom_fwd(device_type="cpu")
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        @tamp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w.t(), x.t() @ g

    seen = _seen()
    fn = make_matmul_fn(None, seen)
    _, (x, w) = _leaves(rng, shapes=((9, 17), (17, 5)))
    tx, tw = (to_torch(torch, t).requires_grad_() for t in (x, w))
    g = ampc.tensor(rng.uniform(-1, 1, (9, 5)).astype(np.float32))
    for dt, tdt in ((ampc.bfloat16, torch.bfloat16),
                    (ampc.float16, torch.float16)):
        x.grad = w.grad = tx.grad = tw.grad = None
        with ampc.autocast("cpu", dtype=dt):
            out = fn.apply(x, w)
        with torch.autocast("cpu", dtype=tdt):
            tout = TMatMul.apply(tx, tw)
        assert out.dtype.name == str(tout.dtype).split(".")[1]
        out.backward(g.to(dt))
        tout.backward(to_torch(torch, g).to(tdt))
        for a, t in ((out, tout), (x.grad, tx.grad), (w.grad, tw.grad)):
            assert_close(a, t.detach().double().numpy(), dt.name, k=17)


# ----------------------------------------------------------------------------
# register_op


def _recorder(seen):
    def op(a, b=None, *, scale=1.0):
        seen["in"] = (a.dtype, None if b is None else b.dtype)
        seen["autocast"] = ampc.is_autocast_enabled("cpu")
        out = a @ a.t() if b is None else a * b
        return out * scale
    return op


@pytest.mark.parametrize("region,inputs,expected", [
    (ampc.bfloat16, (ampc.bfloat16, ampc.float32), ampc.float32),
    (ampc.float16, (ampc.float16, ampc.float16), ampc.float32),
])
def test_fp32_policy(region, inputs, expected):
    seen = {}
    op = register_op(_recorder(seen), policy="fp32")
    a, b = (ampc.ones(3, 4, dtype=d) for d in inputs)
    with ampc.autocast("cpu", dtype=region):
        out = op(a, b)
        assert ampc.is_autocast_enabled("cpu")   # restored after the call
    assert seen == {"in": (expected, expected), "autocast": False}
    assert out.dtype is expected


@pytest.mark.parametrize("region", [ampc.bfloat16, ampc.float16])
def test_lower_precision_policy_uses_the_regions_dtype(region, rng):
    seen = {}
    op = register_op(_recorder(seen), policy="lower_precision_fp")
    v = ref.round_to(rng.uniform(-2, 2, (5, 9)), "float32")
    with ampc.autocast("cpu", dtype=region):
        out = op(ampc.tensor(v.astype(np.float32)))
    assert seen == {"in": (region, None), "autocast": False}
    assert out.dtype is region
    low = ref.round_to(v, region.name)
    assert_close(out, low @ low.T, region.name, k=9)


@pytest.mark.parametrize("inputs,expected", [
    ((ampc.float16, ampc.float32), ampc.float32),
    ((ampc.bfloat16, ampc.bfloat16), ampc.bfloat16),
    ((ampc.float16, ampc.bfloat16), ampc.float32),
    ((ampc.float16, ampc.float16), ampc.float16),
])
def test_promote_policy_takes_the_widest(inputs, expected):
    seen = {}
    op = register_op(_recorder(seen), policy="promote")
    a, b = (ampc.ones(2, 3, dtype=d) for d in inputs)
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = op(a, b=b, scale=0.5)
    assert seen["in"] == (expected, expected)
    assert out.dtype is expected
    assert_close(out, np.full((2, 3), 0.5), expected.name)


def test_outside_autocast_and_without_float_tensors_fn_runs_as_is():
    seen = {}
    op = register_op(_recorder(seen), policy="fp32")
    a = ampc.ones(2, 2, dtype=ampc.bfloat16)
    assert op(a).dtype is ampc.bfloat16
    assert seen["in"] == (ampc.bfloat16, None)
    ints = register_op(lambda i: i + 1, policy="lower_precision_fp")
    with ampc.autocast("cpu"):
        assert ints(ampc.arange(3)).dtype is ampc.int64
        assert ints(2) == 3


def test_gradients_flow_back_through_the_policy_casts(rng):
    """fp32 policy on bfloat16 leaves: the op computes in float32 and the
    gradients (checked against central differences of the float64
    function) come back in bfloat16."""
    def f(x, w):
        return ((x @ w).exp() * x.sum()).sum()

    def f64(x, w):
        return np.sum(np.exp(x @ w) * x.sum())

    op = register_op(f, policy="fp32")
    vals = [ref.round_to(rng.uniform(-0.5, 0.5, s), "bfloat16")
            for s in ((3, 5), (5, 2))]
    leaves = [ampc.tensor(v.astype(np.float32)).to(ampc.bfloat16)
              .requires_grad_() for v in vals]
    with ampc.autocast("cpu", dtype=ampc.bfloat16):
        out = op(*leaves)
    assert out.dtype is ampc.float32
    assert_close(out, f64(*vals), "float32", k=15)
    out.backward()
    eps = 1e-6
    for i, leaf in enumerate(leaves):
        num = np.zeros_like(vals[i])
        for idx in np.ndindex(vals[i].shape):
            p = [v.copy() for v in vals]
            m = [v.copy() for v in vals]
            p[i][idx] += eps
            m[i][idx] -= eps
            num[idx] = (f64(*p) - f64(*m)) / (2 * eps)
        assert leaf.grad.dtype is ampc.bfloat16
        assert_close(leaf.grad, num, "bfloat16", k=3)


def test_an_error_inside_the_op_gets_a_note_with_dtypes():
    def bad(a, b):
        return a @ b

    op = register_op(bad, policy="lower_precision_fp", name="my_proj")
    with ampc.autocast("cpu", dtype=ampc.float16):
        with pytest.raises(RuntimeError) as info:
            op(ampc.ones(2, 3), ampc.ones(4, 5, dtype=ampc.bfloat16))
        assert ampc.is_autocast_enabled("cpu")   # restored after the error
    note = "\n".join(info.value.__notes__)
    assert ("in op 'my_proj' (autocast policy 'lower_precision_fp', "
            "autocast('cpu', dtype=ampc.float16)): its tensor arguments "
            "float32[2, 3], bfloat16[4, 5] were cast to ampc.float16") in note


def test_decorator_form_name_and_attribute():
    @register_op(policy="promote")
    def fused(a, b):
        """doc"""
        return a + b

    assert fused.__name__ == "fused" and fused.__doc__ == "doc"
    assert fused.autocast_policy == "promote"


def test_bad_policy_and_bad_callable():
    with pytest.raises(ValueError, match="policy must be one of "
                       "lower_precision_fp, fp32, promote; got 'fp64'"):
        register_op(lambda a: a, policy="fp64")
    with pytest.raises(TypeError, match="expected a callable, got int"):
        register_op(3, policy="fp32")


def test_register_op_wraps_a_function_apply(rng):
    """A custom Function's apply under a policy: the Function sees float32
    and its gradient returns in the leaf's dtype."""
    seen = _seen()
    fn = make_matmul_fn(None, seen)
    op = register_op(fn.apply, policy="fp32", name="MatMul")
    _, (x, w) = _leaves(rng, ampc.float16)
    with ampc.autocast("cpu", dtype=ampc.float16):
        out = op(x, w)
    assert seen["fwd"] == (False, ampc.float32, ampc.float32)
    out.sum().backward()
    assert seen["bwd"][0] is False
    assert x.grad.dtype is ampc.float16
    assert np.isfinite(to64(x.grad)).all()
