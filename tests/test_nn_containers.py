"""ModuleDict, ParameterList, ParameterDict, Unflatten and
Tensor.unflatten: registration (parameters, state_dict, to, zero_grad),
the dict/list protocols, reprs and errors, beside torch where installed."""
import collections

import numpy as np
import pytest

import ampc
from ampc import nn

try:
    import torch
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ----------------------------------------------------------------------------
# ModuleDict


def test_module_dict_registers_and_keeps_order():
    d = nn.ModuleDict({"b": nn.Linear(2, 3), "a": nn.ReLU()})
    d["c"] = nn.Linear(3, 1, bias=False)
    assert list(d) == ["b", "a", "c"]
    assert list(d.keys()) == ["b", "a", "c"]
    assert [type(m).__name__ for m in d.values()] == ["Linear", "ReLU",
                                                      "Linear"]
    assert "a" in d and "z" not in d and len(d) == 3
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias",
                                                    "c.weight"]
    assert list(d.state_dict()) == ["b.weight", "b.bias", "c.weight"]
    popped = d.pop("a")
    assert type(popped).__name__ == "ReLU" and list(d) == ["b", "c"]
    del d["b"]
    assert list(d) == ["c"]
    d.update([("x", nn.ReLU()), ["y", nn.Tanh()]])
    d.update(nn.ModuleDict({"z": nn.Sigmoid()}))
    assert list(d) == ["c", "x", "y", "z"]
    d.clear()
    assert len(d) == 0


def test_module_dict_in_a_model_trains():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2),
                                        "b": nn.Linear(4, 3)})

        def forward(self, x):
            return self.heads["a"](x).sum() + self.heads["b"](x).sum()

    net = Net()
    net(ampc.randn(5, 4)).backward()
    grads = [p.grad for p in net.parameters()]
    assert len(grads) == 4 and all(g is not None for g in grads)
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net.half().heads["b"].weight.dtype is ampc.float16


def test_module_dict_errors():
    d = nn.ModuleDict()
    with pytest.raises(TypeError, match="iterable of key/value pairs"):
        d.update(3)
    with pytest.raises(TypeError, match="element #0 should be Iterable"):
        d.update([3])
    with pytest.raises(ValueError, match="element #0 has length 3"):
        d.update([("a", nn.ReLU(), 1)])
    with pytest.raises(TypeError):
        d["a"] = 3
    with pytest.raises(KeyError):
        d["missing"]


# ----------------------------------------------------------------------------
# ParameterList / ParameterDict


def test_parameter_list_wraps_tensors_and_indexes_like_a_list():
    pl = nn.ParameterList([ampc.ones(2), nn.Parameter(ampc.zeros(3))])
    pl.append(ampc.full((2, 2), 3.0))
    pl += [ampc.ones(1)]
    assert len(pl) == 4
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "3"]
    assert pl[-1].shape == (1,) and pl[2].sum().item() == 12.0
    sub = pl[1:3]
    assert isinstance(sub, nn.ParameterList) and len(sub) == 2
    assert sub[0] is pl[1]
    pl[0] = ampc.zeros(5)
    assert isinstance(pl[0], nn.Parameter) and pl[0].shape == (5,)
    with pytest.raises(IndexError, match="index 4 is out of range"):
        pl[4]
    with pytest.raises(TypeError, match="should be called with an iterable"):
        pl.extend(ampc.ones(2))
    with pytest.raises(RuntimeError, match="should not be called"):
        pl()


def test_parameter_list_keeps_other_objects_out_of_parameters():
    pl = nn.ParameterList([ampc.ones(2), "note"])
    assert pl[1] == "note"
    assert len(list(pl.parameters())) == 1
    assert "(1): Object of type: str" in repr(pl)


def test_parameter_dict_protocol():
    pd = nn.ParameterDict({"z": ampc.ones(2), "a": ampc.zeros(1)})
    # a plain dict's items go in sorted order, as in PyTorch
    assert list(pd) == ["a", "z"]
    pd2 = nn.ParameterDict(collections.OrderedDict(
        [("z", ampc.ones(2)), ("a", ampc.zeros(1))]))
    assert list(pd2) == ["z", "a"]
    pd["m"] = ampc.full((3,), 2.0)
    assert isinstance(pd["m"], nn.Parameter)
    assert list(pd.state_dict()) == ["a", "z", "m"]
    assert pd.get("nope") is None and pd.get("nope", 5) == 5
    assert pd.setdefault("m") is pd["m"]
    key, value = pd.popitem()
    assert key == "m" and value.shape == (3,) and "m" not in pd
    merged = pd | {"q": ampc.ones(4)}
    assert list(merged) == ["a", "z", "q"] and list(pd) == ["a", "z"]
    pd |= {"q": ampc.ones(4)}
    assert list(pd) == ["a", "z", "q"]
    assert list(reversed(pd)) == ["q", "z", "a"]
    assert pd.pop("a").shape == (1,) and len(pd) == 2
    assert list(pd.copy()) == ["z", "q"]
    assert list(pd.fromkeys(["u", "v"])) == ["u", "v"]
    pd.clear()
    assert len(pd) == 0 and list(pd.parameters()) == []


def test_parameter_dict_errors():
    pd = nn.ParameterDict()
    with pytest.raises(TypeError, match="not a string"):
        pd[1] = ampc.ones(1)
    with pytest.raises(TypeError, match="iterable of key/value pairs"):
        pd.update(5)
    with pytest.raises(RuntimeError, match="should not be called"):
        pd()


def test_parameter_containers_move_and_load_state():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([ampc.ones(3)])
            self.shifts = nn.ParameterDict({"s": ampc.zeros(3)})

        def forward(self, x):
            return x * self.scales[0] + self.shifts["s"]

    net = Net()
    net(ampc.ones(3)).sum().backward()
    np.testing.assert_array_equal(net.scales[0].grad.numpy(), [1, 1, 1])
    state = {k: v + 1 for k, v in net.state_dict().items()}
    other = Net()
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.scales[0].detach().numpy(), [2] * 3)
    assert other.bfloat16().shifts["s"].dtype is ampc.bfloat16


@needs_torch
def test_container_reprs_and_names_match_torch():
    for build in (
            lambda m: m.nn.ParameterList([m.ones(2), m.zeros(3, 4)]),
            lambda m: m.nn.ParameterDict({"b": m.ones(2), "a": m.ones(1)}),
            lambda m: m.nn.ModuleDict({"x": m.nn.ReLU(),
                                       "l": m.nn.Linear(2, 1)})):
        ours, theirs = build(ampc), build(torch)
        assert repr(ours).replace("ampc.", "torch.") == repr(theirs)
        assert [n for n, _ in ours.named_parameters()] == \
            [n for n, _ in theirs.named_parameters()]


# ----------------------------------------------------------------------------
# unflatten


@pytest.mark.parametrize("shape, dim, sizes", [
    ((2, 6), 1, (2, 3)), ((2, 6), 1, (-1, 3)), ((2, 6), -1, (3, -1)),
    ((6,), 0, (1, 6, 1)), ((0, 6), 1, (2, -1)), ((5, 7), 0, [5])])
def test_unflatten_shapes_and_values(shape, dim, sizes):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    out = ampc.tensor(x).unflatten(dim, sizes)
    d = dim % len(shape)
    known = int(np.prod([s for s in sizes if s != -1]))
    sizes_out = tuple(shape[d] // known if s == -1 else s for s in sizes)
    expect = x.reshape(shape[:d] + sizes_out + shape[d + 1:])
    np.testing.assert_array_equal(out.numpy(), expect)
    np.testing.assert_array_equal(ampc.unflatten(ampc.tensor(x), dim,
                                                 sizes).numpy(), expect)


def test_unflatten_non_contiguous_and_gradient():
    base = ampc.randn(6, 4)
    x = base.t().detach().requires_grad_()
    y = x.unflatten(1, (2, 3))
    np.testing.assert_array_equal(
        y.detach().numpy(), x.detach().numpy().reshape(4, 2, 3))
    (y * ampc.arange(6).reshape(2, 3)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(),
                                  np.tile(np.arange(6.0), (4, 1)))


def test_unflatten_errors():
    x = ampc.zeros(2, 6)
    with pytest.raises(RuntimeError, match=r"Provided sizes \[2, 4\] don't "
                       r"multiply up to the size of dim 1 \(6\)"):
        x.unflatten(1, (2, 4))
    with pytest.raises(RuntimeError, match="only one dimension"):
        x.unflatten(1, (-1, -1))
    with pytest.raises(RuntimeError, match="sizes must be non-empty"):
        x.unflatten(1, ())
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.unflatten(2, (2, 3))


def test_unflatten_module():
    m = nn.Unflatten(1, (2, 3))
    assert repr(m) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert m(ampc.ones(4, 6)).shape == (4, 2, 3)
    with pytest.raises(TypeError, match="must be a tuple of ints"):
        nn.Unflatten(1, 5)
    with pytest.raises(TypeError, match="element of type float at pos 1"):
        nn.Unflatten(1, (2, 3.0))
