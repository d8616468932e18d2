"""A module's hooks, PyTorch's ``register_forward_pre_hook`` and
``register_forward_hook`` (functions called around ``forward`` that see,
and may replace, its arguments and its output) and the backward ones
(``_backward_hooks.py``).  ``Module`` inherits the
registration methods; ``call_with_hooks`` is its ``__call__`` once a hook
is registered (a module without hooks calls ``forward`` directly).

>>> import ampc
>>> from ampc import nn
>>> m = nn.Linear(2, 2)
>>> seen = []
>>> h = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
>>> _ = m(ampc.ones(3, 2))
>>> seen
[ampc.Size([3, 2])]
>>> h.remove()
"""
import collections
import warnings

from ...utils.hooks import RemovableHandle
from ._backward_hooks import setup_input, setup_output

__all__ = ["ModuleHooks", "call_with_hooks"]


class _Hooks:
    """One module's hooks: ordered ``id -> hook`` tables, and the ids of the
    hooks that take keyword arguments or must run after a failed forward."""

    def __init__(self):
        self.pre = collections.OrderedDict()
        self.post = collections.OrderedDict()
        self.with_kwargs = collections.OrderedDict()
        self.always_call = collections.OrderedDict()
        self.backward_pre = collections.OrderedDict()
        self.backward = collections.OrderedDict()


def _add(table, hook, prepend, extra):
    handle = RemovableHandle(table, extra_dict=extra)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


class ModuleHooks:
    """The registration methods of ``Module`` (a mixin)."""

    _hooks = None       # an instance's _Hooks, made at its first hook

    def _hook_tables(self):
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = self.__dict__["_hooks"] = _Hooks()
        return hooks

    def register_forward_pre_hook(self, hook, *, prepend=False,
                                  with_kwargs=False):
        """Call ``hook(module, args)`` before each ``forward``;
        with ``with_kwargs=True``, ``hook(module, args, kwargs)``.  A result
        other than None replaces the arguments (a tuple, or one value;
        with keyword arguments, an ``(args, kwargs)`` pair).  ``prepend``
        runs it before the hooks already registered.  Returns a handle
        whose ``remove()`` unregisters it."""
        t = self._hook_tables()
        handle = _add(t.pre, hook, prepend, [t.with_kwargs])
        if with_kwargs:
            t.with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend=False,
                              with_kwargs=False, always_call=False):
        """Call ``hook(module, args, output)`` after each ``forward``; with
        ``with_kwargs=True``, ``hook(module, args, kwargs, output)``.  A
        result other than None replaces the output.  With
        ``always_call=True`` it runs even when ``forward`` raises (then
        the exception propagates).  Returns a handle whose ``remove()``
        unregisters it."""
        t = self._hook_tables()
        handle = _add(t.post, hook, prepend,
                      [t.with_kwargs, t.always_call])
        if with_kwargs:
            t.with_kwargs[handle.id] = True
        if always_call:
            t.always_call[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook, *, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradient of the
        module's output has been computed; a tuple it returns replaces
        ``grad_output``.  Returns a handle whose ``remove()`` unregisters
        it.  (ampc: the module takes at most one tensor argument that
        requires grad and returns one tensor.)"""
        return _add(self._hook_tables().backward_pre, hook, prepend, None)

    def register_full_backward_hook(self, hook, *, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients
        of the module's positional arguments have been computed (None for
        arguments that are not tensors or do not require grad; at the
        output's gradient when none does); a tuple it returns replaces
        ``grad_input``.  Returns a handle whose ``remove()`` unregisters
        it."""
        return _add(self._hook_tables().backward, hook, prepend, None)

    def register_backward_hook(self, hook):
        """PyTorch's deprecated form: ampc gives it the full hook's
        semantics (the gradients of the module's own arguments and
        output), with a warning."""
        warnings.warn(
            "register_backward_hook() is deprecated in favor of "
            "register_full_backward_hook(); ampc runs it as a full backward "
            "hook (grad_input is the gradient of the module's arguments, "
            "not of its last operation's)", FutureWarning, stacklevel=2)
        return self.register_full_backward_hook(hook)

    def _has_hooks(self):
        """Whether a forward or backward hook is registered (a fused
        Sequential then runs this module on its own)."""
        h = self._hooks
        return h is not None and bool(h.pre or h.post or h.backward_pre or
                                      h.backward)


def _run_pre_hooks(module, hooks, args, kwargs, ran):
    """The pre-hooks in order; ``ran.args`` / ``ran.kwargs`` follow the
    arguments as each hook replaces them."""
    for hook_id, hook in tuple(hooks.pre.items()):
        if hook_id in hooks.with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of "
                        f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        ran.args, ran.kwargs = args, kwargs
    return args, kwargs


def _run_post_hooks(module, hooks, args, kwargs, output, ran):
    """The forward hooks in order; the ids of ``always_call`` ones go into
    ``ran`` as they start, and ``ran.output`` follows the output."""
    for hook_id, hook in tuple(hooks.post.items()):
        if hook_id in hooks.always_call:
            ran.add(hook_id)
        if hook_id in hooks.with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
            ran.output = output
    return output


class _Ran(set):
    """The ``always_call`` hooks already run, the arguments as the
    pre-hooks have left them so far, and the output so far (None until
    ``forward`` returns)."""

    output = None

    def __init__(self, args, kwargs):
        super().__init__()
        self.args, self.kwargs = args, kwargs


def _run_always_call_hooks(module, hooks, args, kwargs, ran):
    """After a pre-hook, ``forward`` or a forward hook raised: the
    ``always_call`` hooks that have not run yet, with the output so far;
    an exception of theirs becomes a warning, as in PyTorch, so that the
    first one is the one raised."""
    output = ran.output
    for hook_id, hook in tuple(hooks.post.items()):
        if hook_id not in hooks.always_call or hook_id in ran:
            continue
        try:
            if hook_id in hooks.with_kwargs:
                result = hook(module, args, kwargs, output)
            else:
                result = hook(module, args, output)
        except Exception as e:
            warnings.warn(
                "forward hook with ``always_call=True`` raised an exception "
                "that was silenced as another error was raised in forward: "
                f"{e}")
            continue
        if result is not None:
            output = result


def call_with_hooks(module, args, kwargs):
    """``module(*args, **kwargs)`` with its forward hooks around
    ``forward``."""
    hooks = module._hooks
    ran = _Ran(args, kwargs)
    backward = hooks.backward or hooks.backward_pre
    try:
        args, kwargs = _run_pre_hooks(module, hooks, args, kwargs, ran)
        if backward:
            call, args = setup_input(module, hooks, args)
        ran.output = module.forward(*args, **kwargs)
        output = _run_post_hooks(module, hooks, args, kwargs, ran.output,
                                 ran)
        return setup_output(call, output) if backward else output
    except Exception:
        if hooks.always_call:
            # (PyTorch's: the arguments as far as the pre-hooks got)
            _run_always_call_hooks(module, hooks, ran.args, ran.kwargs, ran)
        raise
