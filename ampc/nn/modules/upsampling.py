"""``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``:
``F.interpolate`` as layers.

>>> import ampc
>>> ampc.nn.Upsample(scale_factor=2, mode="bilinear")
Upsample(scale_factor=2.0, mode='bilinear')
"""
from .. import functional as F
from .module import Module

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


class Upsample(Module):
    """Resamples (N, C, W), (N, C, H, W) or (N, C, D, H, W) input to
    ``size`` or by ``scale_factor`` in ``mode`` ('nearest', 'nearest-exact',
    'linear', 'bilinear', 'bicubic', 'trilinear', 'area'); see
    ``F.interpolate``.

    >>> import ampc
    >>> ampc.nn.Upsample(scale_factor=2)(ampc.ones(1, 2, 3, 3)).shape
    ampc.Size([1, 2, 6, 6])
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest",
                 align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode,
                             self.align_corners, self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode='nearest')`` for (N, C, H, W)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode='bilinear',
    align_corners=True)`` for (N, C, H, W)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear",
                         align_corners=True)
