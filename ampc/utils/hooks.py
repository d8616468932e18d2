"""``RemovableHandle``: what registering a hook returns (a tensor's
``register_hook``, a module's forward hooks), as ``torch.utils.hooks``.

>>> import collections
>>> hooks = collections.OrderedDict()
>>> handle = RemovableHandle(hooks)
>>> hooks[handle.id] = print
>>> handle.remove()
>>> len(hooks)
0
"""
import collections
import itertools
import weakref

__all__ = ["RemovableHandle"]

_next_id = itertools.count()


class RemovableHandle:
    """Removes the hook it was returned for: ``handle.remove()``, or at the
    end of a ``with handle:`` block.  It holds its dicts weakly, so a handle
    kept after its tensor or module is gone does not keep them alive.

    ``extra_dict``: further dicts (or one) keyed by the same id, such as the
    set of hooks that take keyword arguments."""

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(_next_id)
        if extra_dict is None:
            extra_dict = ()
        elif not isinstance(extra_dict, (list, tuple)):
            extra_dict = (extra_dict,)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def add_hook(owner, attr, hook):
    """Register ``hook`` in the ordered table ``owner.<attr>`` (made at the
    first hook) and return its handle."""
    hooks = getattr(owner, attr)
    if hooks is None:
        hooks = collections.OrderedDict()
        setattr(owner, attr, hooks)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle
