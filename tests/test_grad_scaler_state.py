"""GradScaler's state_dict, load_state_dict and pickling: PyTorch's
test_grad_scaling_state_dict, the keys and values, a round trip in the
middle of training, the errors, and pickling a Python subclass."""
import copy
import pickle

import pytest

import ampc
from ampc.amp import GradScaler
from test_grad_scaler import (  # noqa: F401 (_quiet: an autouse fixture)
    MyScaler, _quiet, create_scaling_case, scaler_cpu,
)


@pytest.mark.parametrize("lazy_init_scale", [True, False])
def test_state_dict(lazy_init_scale):
    """test_grad_scaling_state_dict."""
    s0 = scaler_cpu(init_scale=3.0, growth_factor=4.0, backoff_factor=0.5,
                    growth_interval=2)
    s1 = scaler_cpu(init_scale=6.0, growth_factor=7.0, backoff_factor=0.8,
                    growth_interval=1)
    s1._init_growth_tracker = 7
    if lazy_init_scale:
        s1.scale(ampc.full((1,), 4.0))
        assert isinstance(s1._scale, ampc.Tensor)
        assert s1._scale.dtype is ampc.float32
    s1.load_state_dict(s0.state_dict())
    assert s1.get_scale() == 3.0
    assert s1.get_growth_factor() == 4.0
    assert s1.get_backoff_factor() == 0.5
    assert s1.get_growth_interval() == 2
    assert s1._init_growth_tracker == 0


def test_state_dict_keys_and_values():
    s = scaler_cpu(init_scale=2.0 ** 10, growth_interval=3)
    assert list(s.state_dict()) == ["scale", "growth_factor",
                                    "backoff_factor", "growth_interval",
                                    "_growth_tracker"]
    assert s.state_dict() == {"scale": 1024.0, "growth_factor": 2.0,
                              "backoff_factor": 0.5, "growth_interval": 3,
                              "_growth_tracker": 0}
    s = scaler_cpu(init_scale=7)
    assert s.get_scale() == 7 and type(s.get_scale()) is int
    assert type(s.state_dict()["scale"]) is int
    s.scale(ampc.ones(1))
    assert type(s.get_scale()) is float


def test_state_dict_round_trip_mid_training():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    scaler = scaler_cpu(init_scale=2.0 ** 8, growth_interval=2)
    for x, y in data[:3]:
        opt.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
    sd = scaler.state_dict()
    resumed = scaler_cpu()
    resumed.load_state_dict(copy.deepcopy(sd))
    for s in (scaler, resumed):
        opt.zero_grad()
        x, y = data[3]
        s.scale(loss_fn(model(x), y)).backward()
    assert resumed.get_scale() == scaler.get_scale()
    assert resumed._get_growth_tracker() == scaler._get_growth_tracker()


def test_load_state_dict_errors():
    s = scaler_cpu()
    with pytest.raises(RuntimeError, match="^The source state dict is "
                                           "empty, possibly because it was "
                                           "saved from a disabled instance "
                                           "of GradScaler.$"):
        s.load_state_dict({})
    with pytest.raises(KeyError):
        s.load_state_dict({"scale": 1.0})
    disabled = scaler_cpu(enabled=False)
    assert disabled.load_state_dict({}) is None


def test_pickling():
    s = scaler_cpu(init_scale=16.0, growth_factor=3.0, backoff_factor=0.25,
                   growth_interval=5)
    s.scale(ampc.ones(1))
    s._growth_tracker.fill_(2)
    state = s.__getstate__()
    assert state["_scale"] is None and state["_growth_tracker"] is None
    assert state["_init_scale"] == 16.0 and state["_init_growth_tracker"] == 2
    r = pickle.loads(pickle.dumps(s))
    assert type(r) is GradScaler
    assert r._scale is None and r.get_scale() == 16.0
    assert r._get_growth_tracker() == 2
    assert (r.get_growth_factor(), r.get_backoff_factor(),
            r.get_growth_interval()) == (3.0, 0.25, 5)
    r.scale(ampc.ones(1))
    assert r._scale.item() == 16.0 and r._growth_tracker.item() == 2
    c = copy.deepcopy(s)
    assert c.state_dict() == s.state_dict()


def test_pickling_mid_iteration_fails():
    model, _, opt, _, data, loss_fn, _ = create_scaling_case()
    s = scaler_cpu()
    x, y = data[0]
    s.scale(loss_fn(model(x), y)).backward()
    s.unscale_(opt)
    with pytest.raises(AssertionError, match="^A GradScaler instance may "
                                             "only be pickled at the "
                                             "beginning of an iteration, or "
                                             "at the end after "
                                             "scaler.update\\(\\).$"):
        pickle.dumps(s)
    s.step(opt)
    s.update()
    pickle.dumps(s)


def test_subclass_and_its_attributes_pickle():
    s = MyScaler("abc")
    r = pickle.loads(pickle.dumps(s))
    assert isinstance(r, MyScaler) and r.tag == "abc"
    assert r.get_scale() == 32.0
