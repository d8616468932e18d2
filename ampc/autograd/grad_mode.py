"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode
(thread-local, as in PyTorch)."""
import functools
import inspect
import threading

from .._dtype_device import _pybool


# ----------------------------------------------------------------------------
# grad mode: thread-local, as in PyTorch (a new thread starts enabled)
class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled():
    """True when operations record the graph for autograd.

    >>> import ampc
    >>> with ampc.no_grad():
    ...     ampc.is_grad_enabled()
    False
    """
    return _mode.enabled


class _GradModeContext:
    """Base of no_grad / enable_grad / set_grad_enabled: a context manager
    that is also a decorator (also for generator functions), restoring the
    previous mode on exit."""

    _target = True

    def __enter__(self):
        self._prev = _mode.enabled
        _mode.enabled = self._target

    def __exit__(self, exc_type, exc, tb):
        _mode.enabled = self._prev
        return False

    def clone(self):
        return self.__class__()

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"{type(self).__name__}(): can only decorate a callable, got "
                f"{type(func).__name__}")
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            gen = func(*args, **kwargs)
            # the mode is set around every step of the generator and
            # restored while it is suspended
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as exc:
                        with self.clone():
                            response = gen.throw(exc)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value
        return wrapper


class no_grad(_GradModeContext):
    """Context manager and decorator that turns gradient recording off
    (in this thread).

    >>> import ampc
    >>> x = ampc.ones(2, requires_grad=True)
    >>> with ampc.no_grad():
    ...     (x * 2).requires_grad
    False
    >>> @ampc.no_grad()
    ... def f(t):
    ...     return t * 2
    >>> f(x).requires_grad
    False
    """

    _target = False

    def __new__(cls, orig_func=None):
        # ``@no_grad`` without parentheses decorates directly.
        self = super().__new__(cls)
        if orig_func is None:
            return self
        return self(orig_func)


class enable_grad(_GradModeContext):
    """Context manager and decorator that turns gradient recording on
    (in this thread), e.g. inside ``no_grad``.

    >>> import ampc
    >>> with ampc.no_grad():
    ...     with ampc.enable_grad():
    ...         ampc.is_grad_enabled()
    True
    """

    _target = True

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if orig_func is None:
            return self
        return self(orig_func)


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(mode)``: sets grad mode now (as a function), and
    restores the previous mode on exit (as a context manager or decorator).

    >>> import ampc
    >>> with ampc.set_grad_enabled(False):
    ...     ampc.is_grad_enabled()
    False
    """

    def __init__(self, mode):
        if mode.__class__ is not _pybool:
            raise TypeError(
                "set_grad_enabled(): argument 'mode' must be a bool, but got "
                f"{type(mode).__name__}")
        self._prev = _mode.enabled
        self._target = mode
        _mode.enabled = mode

    def __enter__(self):
        pass

    def __call__(self, func):
        # as a decorator, the mode set by __init__ is undone at once
        _mode.enabled = self._prev
        return super().__call__(func)

    def clone(self):
        return set_grad_enabled(self._target)


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (ampc has no separate inference tensors).

    >>> import ampc
    >>> with ampc.inference_mode():
    ...     ampc.is_grad_enabled()
    False
    """

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode) and mode.__class__ is not _pybool:
            self._target = False
            return self(mode)
        return self

    def __init__(self, mode=True):
        if mode.__class__ is _pybool:
            self._target = not mode

    def clone(self):
        return inference_mode(not self._target)
