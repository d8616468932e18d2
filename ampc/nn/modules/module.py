"""``nn.Module``: the base class of every layer and model.

A module registers its parameters, buffers and sub-modules when they are
assigned as attributes (``self.fc = nn.Linear(...)``), keeping each kind in
its own ordered dict as PyTorch does; everything else (``parameters()``,
``state_dict()``, ``to()``, ``train()``) walks those dicts.

>>> import ampc
>>> from ampc import nn
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = nn.Linear(4, 2)
...     def forward(self, x):
...         return self.fc(x)
>>> [name for name, _ in Net().named_parameters()]
['fc.weight', 'fc.bias']
"""
import collections
import itertools

from ... import _C
from ...autograd import no_grad
from ...tensor import Tensor, _parse_to
from ..parameter import Parameter
from ._hooks import ModuleHooks, call_with_hooks

__all__ = ["Module"]

_TB = _C.TensorBase


def _typename(obj):
    """'ampc.FloatTensor', 'int', ... as PyTorch's torch.typename."""
    if isinstance(obj, _TB):
        return "ampc." + obj.type().split(".")[-1]
    module = type(obj).__module__
    name = type(obj).__qualname__
    if module in ("builtins", "__builtin__", None):
        return name
    return module + "." + name


def _addindent(s, n):
    """Indent every line of ``s`` but the first by ``n`` spaces (the layout
    of PyTorch's nested module reprs)."""
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * n + line for line in lines)


class _IncompatibleKeys(
        collections.namedtuple("IncompatibleKeys",
                               ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and the
    keys it did not expect."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module(ModuleHooks):
    """Base class of all neural network modules.  Subclasses assign layers
    and parameters in ``__init__`` (after ``super().__init__()``) and define
    ``forward``; calling the module calls ``forward``.

    >>> import ampc
    >>> from ampc import nn
    >>> m = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    >>> m(ampc.ones(2, 3)).shape
    ampc.Size([2, 4])
    >>> m.eval().training
    False
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes no arguments, but "
                f"got {len(args)} positional and {sorted(kwargs)} keyword "
                "arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = collections.OrderedDict()
        d["_buffers"] = collections.OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = collections.OrderedDict()

    # -- forward -------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required '
            '"forward" function')

    def __call__(self, *args, **kwargs):
        if self._hooks is None:
            return self.forward(*args, **kwargs)
        return call_with_hooks(self, args, kwargs)

    # -- registration --------------------------------------------------------

    def _check_name(self, kind, name, table):
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(
                f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in table:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Add a parameter (a ``Parameter`` or None) under ``name``.

        >>> import ampc
        >>> m = ampc.nn.Module()
        >>> m.register_parameter("w", ampc.nn.Parameter(ampc.zeros(2)))
        >>> [n for n, _ in m.named_parameters()]
        ['w']
        """
        self._check_name("parameter", name,
                         self.__dict__.get("_parameters", {}))
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter "
                f"'{name}' (ampc.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                f"parameters must be created explicitly. To express '{name}' "
                "as a function of another Tensor, compute the value in the "
                "forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer: a tensor that is state but not a parameter (it is
        moved and cast with the module, and saved in ``state_dict`` unless
        ``persistent=False``).

        >>> import ampc
        >>> m = ampc.nn.Module()
        >>> m.register_buffer("running_mean", ampc.zeros(3))
        >>> list(m.state_dict())
        ['running_mean']
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError(
                "cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, _TB):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer "
                f"'{name}' (ampc Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module under ``name`` (as attribute assignment
        does).

        >>> import ampc
        >>> m = ampc.nn.Module()
        >>> m.add_module("act", ampc.nn.ReLU())
        >>> m
        Module(
          (act): ReLU()
        )
        """
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name("module", name,
                         self.__dict__.get("_modules", {}))
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*dicts_or_sets):
            for t in dicts_or_sets:
                if name in t:
                    if isinstance(t, dict):
                        del t[name]
                    else:
                        t.discard(name)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError(
                    "cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules,
                        self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter "
                    f"'{name}' (ampc.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError(
                        "cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers,
                            self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(
                        f"cannot assign '{_typename(value)}' as child module "
                        f"'{name}' (ampc.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, _TB):
                        raise TypeError(
                            f"cannot assign '{_typename(value)}' as buffer "
                            f"'{name}' (ampc Tensor or None expected)")
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # only called when normal lookup fails: look in the three dicts
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(
            f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            t = self.__dict__.get(table)
            if t is not None and name in t:
                del t[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__)
        keys |= set(self._parameters) | set(self._buffers) | \
            set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_non_persistent_buffers_set", set())

    # -- walking the tree ----------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yield ``(name, module)`` for this module and every module below
        it, depth first, each module once.

        >>> import ampc
        >>> m = ampc.nn.Sequential(ampc.nn.Linear(2, 2))
        >>> [name for name, _ in m.named_modules()]
        ['', '0']
        """
        if memo is None:
            memo = set()
        if self in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """Yield this module and every module below it."""
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """Yield ``(name, module)`` for the direct children."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def children(self):
        """Yield the direct child modules."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, get_members, prefix="", recurse=True,
                       remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix,
                                     remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and v in memo):
                    continue
                if remove_duplicate:
                    memo.add(v)
                yield module_prefix + ("." if module_prefix else "") + k, v

    def named_parameters(self, prefix="", recurse=True,
                         remove_duplicate=True):
        """Yield ``(name, parameter)`` pairs, names prefixed by the path of
        sub-modules (``"features.0.weight"``), each parameter once.

        >>> import ampc
        >>> lin = ampc.nn.Linear(2, 3)
        >>> [(n, tuple(p.shape)) for n, p in lin.named_parameters()]
        [('weight', (3, 2)), ('bias', (3,))]
        """
        return self._named_members(lambda m: m._parameters.items(), prefix,
                                   recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Yield the parameters (of sub-modules too unless
        ``recurse=False``), as ``optim`` wants them.

        >>> import ampc
        >>> sum(p.numel() for p in ampc.nn.Linear(3, 2).parameters())
        8
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield ``(name, buffer)`` pairs."""
        return self._named_members(lambda m: m._buffers.items(), prefix,
                                   recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Yield the buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        """The sub-module at dotted path ``target`` ("" is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(
                    f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        """The parameter at dotted path ``target`` ("fc.weight")."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(
                f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def apply(self, fn):
        """Call ``fn`` on every sub-module (children first) and on self;
        returns self.

        >>> import ampc
        >>> def init(m):
        ...     if isinstance(m, ampc.nn.Linear):
        ...         ampc.nn.init.zeros_(m.weight)
        >>> net = ampc.nn.Sequential(ampc.nn.Linear(2, 2)).apply(init)
        >>> float(net[0].weight.abs().sum())
        0.0
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- modes ---------------------------------------------------------------

    def train(self, mode=True):
        """Set training mode (``mode=True``) or evaluation mode on this
        module and all below it; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """Evaluation mode (``train(False)``): dropout off, ...; returns
        self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` of every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None (the default) or
        to zeros."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    # -- dtype and device ----------------------------------------------------

    def _apply(self, fn):
        """Apply ``fn`` to every parameter and buffer in this module and
        below.  Parameters keep their identity (``param.data = fn(param)``,
        as PyTorch does), so an optimizer built before ``half()`` or
        ``to(...)`` still holds the module's parameters."""
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for key, param in self._parameters.items():
                if param is None:
                    continue
                new = fn(param)
                if new is param:
                    continue
                grad = param.grad
                param.grad = None
                param.data = new
                if grad is not None:
                    param.grad = fn(grad)
            for key, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """Move and/or cast the parameters and buffers: ``to(device)``,
        ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``.  Only floating
        point tensors change dtype.  Returns self.

        >>> import ampc
        >>> lin = ampc.nn.Linear(2, 2).to(ampc.float16)
        >>> lin.weight.dtype
        ampc.float16
        """
        dev, dtype, _, _ = _parse_to(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, "
                f"but got desired dtype={dtype!r}")

        def convert(t):
            return t._to(dev, dtype if t.dtype.is_floating_point else None)
        return self._apply(convert)

    def cuda(self, device=None):
        """Move every parameter and buffer to the GPU; returns self."""
        return self._apply(lambda t: Tensor.cuda(t, device))

    def cpu(self):
        """Move every parameter and buffer to the CPU; returns self."""
        return self._apply(lambda t: t._to("cpu", None))

    def _cast_floats(self, dtype):
        return self._apply(
            lambda t: t._to(None, dtype) if t.dtype.is_floating_point
            else t)

    def half(self):
        """Cast floating point parameters and buffers to float16."""
        return self._cast_floats(_C.float16)

    def float(self):
        """Cast floating point parameters and buffers to float32."""
        return self._cast_floats(_C.float32)

    def bfloat16(self):
        """Cast floating point parameters and buffers to bfloat16."""
        return self._cast_floats(_C.bfloat16)

    def type(self, dst_type):
        """Cast all parameters and buffers to ``dst_type``."""
        return self._apply(lambda t: t._to(None, dst_type))

    # -- state dict ----------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = \
                    param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and \
                    name not in self._non_persistent_buffers_set:
                destination[prefix + name] = \
                    buf if keep_vars else buf.detach()

    def state_dict(self, *args, destination=None, prefix="",
                   keep_vars=False):
        """An ``OrderedDict`` of every parameter and persistent buffer by
        dotted name, holding detached tensors that share memory with the
        module's (``keep_vars=True``: the parameters themselves).

        >>> import ampc
        >>> list(ampc.nn.Linear(2, 2).state_dict())
        ['weight', 'bias']
        """
        if args:
            # the positional (destination, prefix, keep_vars) of old
            # PyTorch
            if len(args) > 3:
                raise TypeError(
                    f"state_dict() takes at most 3 positional arguments, "
                    f"got {len(args)}")
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = collections.OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination,
                                  prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, strict,
                              missing_keys, unexpected_keys, error_msgs,
                              assign):
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = itertools.chain(self._parameters.items(), persistent.items())
        local_state = {k: v for k, v in local if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, _TB):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected '
                    "Tensor-like object from checkpoint but received "
                    f"{type(value)}")
                continue
            if value.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{value.shape} from checkpoint, the shape in current "
                    f"model is {param.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        if name in self._parameters:
                            new = value if isinstance(value, Parameter) \
                                else Parameter(value, param.requires_grad)
                            self._parameters[name] = new
                        else:
                            self._buffers[name] = value
                    else:
                        param.copy_(value)
            except Exception as e:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose '
                    f"dimensions in the model are {param.shape} and whose "
                    f"dimensions in the checkpoint are {value.shape}, an "
                    f"exception occurred : {e.args}.")
        if strict:
            for key in state_dict.keys():
                if not key.startswith(prefix):
                    continue
                input_name = key[len(prefix):].split(".", 1)
                if len(input_name) > 1:
                    if input_name[0] not in self._modules:
                        unexpected_keys.append(key)
                elif input_name[0] not in local_state:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` into this module
        (casting to each parameter's dtype).  With ``strict=True`` (the
        default) the keys must match exactly; returns the named tuple
        ``(missing_keys, unexpected_keys)``.

        >>> import ampc
        >>> a, b = ampc.nn.Linear(2, 2), ampc.nn.Linear(2, 2)
        >>> b.load_state_dict(a.state_dict())
        <All keys matched successfully>
        """
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(
                "Expected state_dict to be dict-like, got "
                f"{type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, True,
                                         missing_keys, unexpected_keys,
                                         error_msgs, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(
                    0, "Unexpected key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(
                    0, "Missing key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(
                    type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # -- repr ----------------------------------------------------------------

    def extra_repr(self):
        """The text inside this module's parentheses in its repr (layers
        override it)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
