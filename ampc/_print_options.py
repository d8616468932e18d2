"""``set_printoptions``: how tensors print (PyTorch's options and
profiles), read by ``Tensor.__repr__`` (``_tensor_convert.py``).

>>> import ampc
>>> ampc.set_printoptions(precision=2)
>>> ampc.tensor([1.23456])
tensor([1.23])
>>> ampc.set_printoptions(profile="default")
"""
import math

PRINT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
         "sci_mode": None}

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3,
                "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2,
              "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3,
             "linewidth": 80},
}


def set_printoptions(precision=None, threshold=None, edgeitems=None,
                     linewidth=None, profile=None, sci_mode=None):
    """Digits after the point (``precision``), the element count past which
    a tensor prints summarised (``threshold``) with ``edgeitems`` per edge,
    the characters per line (``linewidth``), a ``profile`` ('default',
    'short', 'full') applied first, and ``sci_mode`` (True/False forces
    scientific notation on or off; None chooses per tensor)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions(): profile must be one of "
                f"{sorted(_PROFILES)}, got {profile!r}")
        PRINT.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            PRINT[name] = value
    PRINT["sci_mode"] = sci_mode
