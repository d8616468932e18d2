"""Seeds for shuffling and for DataLoader workers, and ``Generator``: a
private random stream that a sampler, ``random_split`` or a DataLoader can
use instead of ampc's global generator (torch's ``torch.Generator``).

Without a Generator every seed is drawn from ampc's global generator, so
``ampc.manual_seed(n)`` makes shuffling and worker seeds repeatable, as
in PyTorch.

>>> from ampc.utils.data import Generator
>>> g = Generator().manual_seed(42)
>>> g.initial_seed()
42
"""
import os

import numpy as np

from ... import _C
from ..._dtype_device import int64

# Seeds are drawn in [0, 2**62): large enough never to repeat in practice,
# small enough that base_seed + worker_id stays a valid seed.
_SEED_BOUND = 2 ** 62


class Generator:
    """A random stream of its own, seeded with ``manual_seed``.

    >>> from ampc.utils.data import Generator, RandomSampler
    >>> a = list(RandomSampler(range(5), generator=Generator().manual_seed(1)))
    >>> b = list(RandomSampler(range(5), generator=Generator().manual_seed(1)))
    >>> a == b
    True
    """

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(
                f"Generator(): only 'cpu' generators exist, got {device!r}")
        self.device = "cpu"
        self.manual_seed(67280421310721)    # PyTorch's default seed

    def manual_seed(self, seed):
        """Restart the stream from ``seed``; returns self."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(
                "Generator.manual_seed(): seed must be an int, got "
                f"{type(seed).__name__}")
        self._seed = int(seed) & (2 ** 64 - 1)
        self._rng = np.random.Generator(np.random.Philox(self._seed))
        return self

    def initial_seed(self):
        """The seed last given to ``manual_seed``."""
        return self._seed

    def seed(self):
        """Reseed from the OS's entropy; returns the new seed."""
        s = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def get_state(self):
        """The stream's state, for ``set_state``."""
        return (self._seed, self._rng.bit_generator.state)

    def set_state(self, state):
        """Restore a state from ``get_state``."""
        seed, bits = state
        self.manual_seed(seed)
        self._rng.bit_generator.state = bits

    def _draw_seed(self):
        return int(self._rng.integers(0, _SEED_BOUND))


def draw_seed(generator=None):
    """A seed in [0, 2**62) from ``generator`` (a ``Generator`` or a
    ``numpy.random.Generator``), or from ampc's global generator."""
    if generator is None:
        t = _C.empty((1,), int64, "cpu")
        _C.random_(t, "randint", 0, _SEED_BOUND)
        return int(t._numpy()[0])
    if isinstance(generator, Generator):
        return generator._draw_seed()
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, _SEED_BOUND))
    raise TypeError(
        "generator must be an ampc.utils.data.Generator, a "
        f"numpy.random.Generator or None, got {type(generator).__name__}")


def numpy_rng(generator=None):
    """A NumPy Generator seeded from ``draw_seed(generator)``, for
    permutations and index draws."""
    return np.random.Generator(np.random.Philox(draw_seed(generator)))
