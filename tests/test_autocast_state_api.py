"""PyTorch's imperative autocast state functions: set_autocast_enabled /
set_autocast_dtype / set_autocast_cache_enabled, the nesting counter, the
deprecated per-device spellings, their errors, and how they combine with
``with autocast`` and threads (compared with torch where installed)."""
import threading
import warnings

import pytest

import ampc
from helpers import torch_or_skip


@pytest.fixture(autouse=True)
def _restore_state():
    """Every test starts from, and leaves, the default state (the state
    lives in a context variable: run the test in a copy of the context)."""
    import contextvars
    ctx = contextvars.copy_context()
    yield ctx


def scenario(lib):
    """The same calls on ampc or torch -> what each query said."""
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        seen.append((lib.is_autocast_enabled(), lib.is_autocast_cpu_enabled(),
                     str(lib.get_autocast_cpu_dtype()).split(".")[-1],
                     str(lib.get_autocast_gpu_dtype()).split(".")[-1]))
        lib.set_autocast_enabled("cpu", True)
        lib.set_autocast_dtype("cpu", lib.float16)
        seen.append((lib.is_autocast_enabled("cpu"),
                     str(lib.get_autocast_dtype("cpu")).split(".")[-1]))
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=False):
            lib.set_autocast_dtype("cpu", lib.float16)
            seen.append(lib.is_autocast_enabled("cpu"))
        seen.append((lib.is_autocast_enabled("cpu"),
                     str(lib.get_autocast_dtype("cpu")).split(".")[-1]))
        seen.append((lib.autocast_increment_nesting(),
                     lib.autocast_increment_nesting(),
                     lib.autocast_decrement_nesting(),
                     lib.autocast_decrement_nesting()))
        lib.set_autocast_cpu_enabled(False)
        lib.set_autocast_cpu_dtype(lib.bfloat16)
        lib.set_autocast_gpu_dtype(lib.bfloat16)
        lib.set_autocast_enabled(True)          # legacy: CUDA
        seen.append((lib.is_autocast_enabled("cpu"),
                     lib.is_autocast_enabled("cuda"),
                     str(lib.get_autocast_dtype("cuda")).split(".")[-1]))
        lib.set_autocast_enabled(False)
        lib.set_autocast_gpu_dtype(lib.float16)
        lib.set_autocast_cache_enabled(False)
        seen.append(lib.is_autocast_cache_enabled())
        lib.set_autocast_cache_enabled(True)
    return seen


def test_state_functions_match_torch(_restore_state):
    got = _restore_state.run(scenario, ampc)
    assert got == [(False, False, "bfloat16", "float16"),
                   (True, "float16"), False, (True, "float16"),
                   (1, 2, 1, 0), (False, True, "bfloat16"), False]
    torch = torch_or_skip()
    assert got == scenario(torch)


def test_ops_follow_the_state_set_by_hand(_restore_state):
    def run():
        x, w = ampc.ones(2, 3), ampc.ones(4, 3)
        ampc.set_autocast_enabled("cpu", True)
        ampc.set_autocast_dtype("cpu", ampc.float16)
        on = ampc.nn.functional.linear(x, w).dtype
        ampc.set_autocast_enabled("cpu", False)
        return on, ampc.nn.functional.linear(x, w).dtype
    assert _restore_state.run(run) == (ampc.float16, ampc.float32)


def test_a_new_thread_starts_from_the_default(_restore_state):
    def run():
        ampc.set_autocast_enabled("cpu", True)
        seen = []
        t = threading.Thread(
            target=lambda: seen.append(ampc.is_autocast_enabled("cpu")))
        t.start()
        t.join()
        return seen[0], ampc.is_autocast_enabled("cpu")
    assert _restore_state.run(run) == (False, True)


def test_decrement_to_zero_then_clear_cache_as_torch_exit_does(
        _restore_state):
    def run():
        w = ampc.nn.Parameter(ampc.ones(4, 3))
        ampc.set_autocast_enabled("cpu", True)
        ampc.autocast_increment_nesting()
        a = ampc.nn.functional.linear(ampc.ones(2, 3), w)
        b = ampc.nn.functional.linear(ampc.ones(2, 3), w)
        # one cached bfloat16 copy of w serves both calls
        same = a.grad_fn.next_functions[1][0] is \
            b.grad_fn.next_functions[1][0]
        if ampc.autocast_decrement_nesting() == 0:
            ampc.clear_autocast_cache()
        c = ampc.nn.functional.linear(ampc.ones(2, 3), w)
        return same, c.grad_fn.next_functions[1][0] is \
            a.grad_fn.next_functions[1][0]
    assert _restore_state.run(run) == (True, False)


def test_deprecated_spellings_warn_with_the_new_name(_restore_state):
    def run():
        with pytest.warns(DeprecationWarning, match=r"ampc.get_autocast_"
                          r"gpu_dtype\(\) is deprecated. Please use "
                          r"ampc.get_autocast_dtype\('cuda'\) instead."):
            ampc.get_autocast_gpu_dtype()
        with pytest.warns(DeprecationWarning,
                          match=r"set_autocast_enabled\('cpu', enabled\)"):
            ampc.set_autocast_cpu_enabled(True)
    _restore_state.run(run)


def test_errors_name_the_function_and_argument(_restore_state):
    def run():
        with pytest.raises(TypeError, match=r"set_autocast_enabled\(\): "
                           r"argument 'enabled' \(position 2\) must be "
                           "bool, not int"):
            ampc.set_autocast_enabled("cpu", 1)
        with pytest.raises(TypeError, match=r"argument 'enabled' "
                           r"\(position 1\) must be bool, not str"):
            ampc.set_autocast_enabled("cpu")
        with pytest.raises(RuntimeError, match="Invalid device string: "
                           "'gpu'"):
            ampc.set_autocast_dtype("gpu", ampc.float16)
        with pytest.raises(TypeError, match=r"set_autocast_dtype\(\): dtype "
                           r"must be a floating point dtype .* \(got "
                           r"ampc.int64\)"):
            ampc.set_autocast_dtype("cpu", ampc.int64)
        with pytest.raises(TypeError, match="set_autocast_cache_enabled"):
            ampc.set_autocast_cache_enabled(None)
        with pytest.raises(RuntimeError, match=r"autocast_decrement_nesting"
                           r"\(\): the autocast nesting is already 0"):
            ampc.autocast_decrement_nesting()
        return ampc.is_autocast_enabled("cpu")
    assert _restore_state.run(run) is False


def exit_keeps_what_was_set_inside(lib):
    """PyTorch's __exit__ puts back its own device's flag and dtype and
    the cache flag, and lowers the nesting count by one: another device's
    flag and a nesting count set inside the region stay."""
    seen = []
    with lib.autocast("cpu", dtype=lib.bfloat16):
        lib.set_autocast_enabled("cuda", True)
        seen.append(lib.autocast_increment_nesting())
    seen.append((lib.is_autocast_enabled("cuda"),
                 lib.is_autocast_enabled("cpu")))
    seen.append(lib.autocast_decrement_nesting())
    lib.set_autocast_enabled("cuda", False)
    return seen


def test_exit_keeps_what_was_set_inside_as_torch(_restore_state):
    got = _restore_state.run(exit_keeps_what_was_set_inside, ampc)
    assert got == [2, (True, False), 0]
    torch = torch_or_skip()
    assert got == exit_keeps_what_was_set_inside(torch)
