"""Random scenario sequences run side by side with
torch.amp.GradScaler("cpu"): the same scales, growth trackers, skipped
steps, parameters and exceptions (types and texts)."""
import pickle
import random

import numpy as np

import ampc
from ampc.amp import GradScaler
from helpers import torch_or_skip
from test_grad_scaler import _quiet  # noqa: F401 (an autouse fixture)


SHAPES = [(3, 4), (5,), (1,), (2, 3, 2)]
OPS = ("iteration", "scale", "backward", "unscale_", "step", "update",
       "zero_grad", "new_scale", "reload")
WEIGHTS = (6, 2, 3, 1, 3, 3, 2, 0.4, 0.6)
# a whole, well-formed iteration, with or without an explicit unscale_
ITERATION = (("zero_grad", "scale", "backward", "step", "update"),
             ("zero_grad", "scale", "backward", "unscale_", "step",
              "update"))


def _call(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:          # noqa: BLE001 (compared by type/text)
        return None, e


def _same_outcome(ea, et, what):
    assert type(ea) is type(et), f"{what}: ampc {ea!r} vs torch {et!r}"
    if et is not None:
        assert str(ea).startswith(str(et)), f"{what}: {ea} vs {et}"


def test_random_sequences_match_torch():
    torch = torch_or_skip()
    rng = random.Random(1234)
    nprng = np.random.default_rng(1234)
    for seq in range(300):
        hp = dict(init_scale=2.0 ** rng.randint(-2, 20),
                  growth_factor=rng.choice([2.0, 1.5, 4.0]),
                  backoff_factor=rng.choice([0.5, 0.25, 0.9]),
                  growth_interval=rng.choice([1, 2, 3, 5]))
        momentum = rng.choice([0.0, 0.9])
        init = [nprng.standard_normal(s).astype(np.float32) for s in SHAPES]
        ap = [ampc.nn.Parameter(ampc.tensor(v)) for v in init]
        tp = [torch.nn.Parameter(torch.tensor(v)) for v in init]
        aopt = ampc.optim.SGD(ap, lr=0.01, momentum=momentum)
        topt = torch.optim.SGD(tp, lr=0.01, momentum=momentum)
        a = GradScaler("cpu", **hp)
        t = torch.amp.GradScaler("cpu", **hp)
        ops = ["scale"]
        for _ in range(rng.randint(4, 12)):
            op = rng.choices(OPS, WEIGHTS)[0]
            ops += rng.choice(ITERATION) if op == "iteration" else [op]
        for step, op in enumerate(ops):
            what = f"sequence {seq} step {step} {op}"
            if op == "backward":
                # grads = g * scale, as backward of a scaled loss gives
                scale = t.get_scale() if t._scale is not None else 1.0
                for pa, pt in zip(ap, tp):
                    if rng.random() < 0.15:
                        continue                    # this param gets none
                    g = (nprng.standard_normal(pa.shape) *
                         np.float32(scale)).astype(np.float32)
                    if rng.random() < 0.15:
                        g.reshape(-1)[rng.randrange(g.size)] = rng.choice(
                            [np.inf, -np.inf, np.nan])
                    if pt.grad is None:
                        pa.grad = ampc.tensor(g)
                        pt.grad = torch.tensor(g)
                    else:
                        with ampc.no_grad():
                            pa.grad.add_(ampc.tensor(g))
                        with torch.no_grad():
                            pt.grad.add_(torch.tensor(g))
            elif op == "scale":
                loss = float(nprng.standard_normal())
                ra, ea = _call(a.scale, ampc.tensor(loss))
                rt, et = _call(t.scale, torch.tensor(loss))
                _same_outcome(ea, et, what)
                if et is None:
                    assert ra.item() == rt.item(), what
            elif op in ("unscale_", "step"):
                ra, ea = _call(getattr(a, op), aopt)
                rt, et = _call(getattr(t, op), topt)
                _same_outcome(ea, et, what)
                assert (ra is None) == (rt is None), what
            elif op == "update":
                _, ea = _call(a.update)
                _, et = _call(t.update)
                _same_outcome(ea, et, what)
            elif op == "new_scale":
                ns = float(2.0 ** rng.randint(-3, 12))
                _, ea = _call(a.update, ns)
                _, et = _call(t.update, ns)
                _same_outcome(ea, et, what)
            elif op == "zero_grad":
                aopt.zero_grad()
                topt.zero_grad()
            elif op == "reload" and len(t._per_optimizer_states) == 0:
                a2 = GradScaler("cpu")
                a2.load_state_dict(a.state_dict())
                a = pickle.loads(pickle.dumps(a2))
                t2 = torch.amp.GradScaler("cpu")
                t2.load_state_dict(t.state_dict())
                t = pickle.loads(pickle.dumps(t2))
            assert a.get_scale() == t.get_scale(), what
            assert a._get_growth_tracker() == t._get_growth_tracker(), what
            assert a.state_dict() == t.state_dict(), what
            for pa, pt in zip(ap, tp):
                np.testing.assert_allclose(
                    pa.detach().numpy(), pt.detach().numpy(), rtol=1e-6,
                    atol=1e-7, err_msg=what)
                if pt.grad is not None:
                    np.testing.assert_array_equal(
                        pa.grad.numpy(), pt.grad.numpy(), err_msg=what)
                else:
                    assert pa.grad is None, what
