"""``ampc.utils.deterministic``: PyTorch's ``fill_uninitialized_memory``.
While ``use_deterministic_algorithms(True)`` is in force and this is True
(the default), ``empty`` (and ``empty_like``, ``new_empty``) fill floats
with NaN and integers with their largest value (bool with True), so a read
of memory nobody wrote shows.

>>> import ampc
>>> ampc.utils.deterministic.fill_uninitialized_memory
True
"""
fill_uninitialized_memory = True
