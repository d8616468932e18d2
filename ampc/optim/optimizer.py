"""``Optimizer``: the base class of ampc's optimisers, with PyTorch's
parameter groups, per-parameter state and state-dict layout.

>>> import ampc
>>> w = ampc.nn.Parameter(ampc.ones(2))
>>> opt = ampc.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> w
Parameter containing:
tensor([0.8000, 0.8000], requires_grad=True)
"""
import collections
import copy
import itertools
import warnings

from .. import _C
from ..autograd import enable_grad

__all__ = ["Optimizer", "required"]

_TB = _C.TensorBase


class _RequiredParameter:
    """The default of an optimiser argument that every group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    if isinstance(obj, _TB):
        return "ampc." + obj.type().split(".")[-1]
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module == "builtins" else module + "." + name


def _scalar(fn, name, value):
    """A float hyper-parameter; a one-element tensor is read out."""
    if isinstance(value, _TB):
        if value.numel() != 1:
            raise ValueError(f"Tensor {name} must be 1-element")
        return float(value.item())
    return value


class Optimizer:
    """Base class of optimisers.  ``params`` is an iterable of tensors or
    of dicts (parameter groups: ``{"params": [...], "lr": ...}``) whose
    missing options are filled from ``defaults``.  Subclasses implement
    ``step``.

    >>> import ampc
    >>> a = ampc.nn.Parameter(ampc.zeros(1))
    >>> b = ampc.nn.Parameter(ampc.zeros(1))
    >>> opt = ampc.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}],
    ...                      lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.1, 1.0]
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, _TB):
            raise TypeError(
                "params argument given to the optimizer should be an "
                "iterable of Tensors or dicts, but got " + _typename(params))
        self.state = collections.defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with "params" and any options
        that differ from the defaults), e.g. layers unfrozen later.

        >>> import ampc
        >>> opt = ampc.optim.SGD([ampc.nn.Parameter(ampc.zeros(1))], lr=0.1)
        >>> opt.add_param_group({"params": ampc.nn.Parameter(ampc.zeros(1)),
        ...                      "lr": 0.01})
        >>> len(opt.param_groups)
        2
        """
        if not isinstance(param_group, dict):
            raise TypeError(
                f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, _TB):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered "
                "collections, but the ordering of tensors in sets will "
                "change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        names, tensors = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. Some "
                    "param names are missing")
            param_group["param_names"] = names
        for p in tensors:
            if not isinstance(p, _TB):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the "
                    "params is " + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required "
                    f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len(set(tensors)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate "
                "parameters; in future, this will cause an error; see "
                "github.com/pytorch/pytorch/issues/40967 for more "
                "information", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group \
                    else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without "
                    f"names. cannot add param group {which} to the "
                    "optimizer")
        if not seen.isdisjoint(tensors):
            raise ValueError(
                "some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimised tensors: to None (the
        default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        """Update the parameters from their gradients (subclasses)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement step()")

    @staticmethod
    def _closure_loss(closure):
        """Run ``closure`` (which recomputes the loss and calls backward)
        with grad mode on, even inside step's no_grad."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- state dict ----------------------------------------------------------

    def state_dict(self):
        """The optimiser's state as PyTorch lays it out: ``{"state":
        {index: {...}}, "param_groups": [{..., "params": [indices]}]}``,
        parameters numbered in group order.  Tensors are the live state
        (not copies), as in PyTorch.

        >>> import ampc
        >>> w = ampc.nn.Parameter(ampc.zeros(2))
        >>> sd = ampc.optim.SGD([w], lr=0.1).state_dict()
        >>> sd["param_groups"][0]["params"]
        [0]
        """
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, _TB) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    @staticmethod
    def _cast_state(param, value, key=None, step_on_device=False):
        """A copy of a state value, its tensors moved to param's device and
        floating point ones cast to param's dtype, except ``step``, which,
        as in torch, stays where it was unless the group is fused or
        capturable (then a float32 tensor on param's device)."""
        if isinstance(value, _TB):
            dev = "cpu" if param.device_type == "cpu" else \
                f"cuda:{param.device_index}"
            if key == "step":
                if step_on_device:
                    return value._to(dev, _C.float32, True)
                return value._to(None, None, True)
            if value.dtype.is_floating_point and \
                    param.dtype.is_floating_point:
                return value._to(dev, param.dtype, True)
            return value._to(dev, None, True)
        if isinstance(value, dict):
            return {k: Optimizer._cast_state(param, v, k, step_on_device)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state(param, v)
                               for v in value)
        return value

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()`` of an optimiser over parameters of the
        same shapes in the same order (state tensors are copied and cast to
        each parameter's dtype and device).

        >>> import ampc
        >>> w = ampc.nn.Parameter(ampc.zeros(2))
        >>> opt = ampc.optim.SGD([w], lr=0.1)
        >>> opt.load_state_dict(ampc.optim.SGD([w], lr=0.5).state_dict())
        >>> opt.param_groups[0]["lr"]
        0.5
        """
        if not isinstance(state_dict, dict) or "param_groups" not in \
                state_dict or "state" not in state_dict:
            raise ValueError(
                "load_state_dict(): expected a dict with 'state' and "
                "'param_groups' (what Optimizer.state_dict() returns), got "
                f"{type(state_dict).__name__}")
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(
                "loaded state dict has a different number of parameter "
                "groups")
        if any(len(g["params"]) != len(s["params"])
               for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't "
                "match the size of optimizer's group")
        id_map = dict(zip(
            itertools.chain.from_iterable(g["params"] for g in saved_groups),
            itertools.chain.from_iterable(g["params"] for g in groups)))
        on_device = {}
        for g in saved_groups:
            for k in g["params"]:
                on_device[k] = bool(g.get("fused") or g.get("capturable"))
        state = collections.defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = self._cast_state(param, v,
                                                step_on_device=on_device[k])
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        self.__setstate__({
            "state": state,
            "param_groups": [update_group(g, ng)
                             for g, ng in zip(groups, saved_groups)],
        })
