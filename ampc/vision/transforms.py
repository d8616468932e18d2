"""Image transforms with torchvision's names: ``Compose``, ``ToTensor``,
``Normalize``, ``RandomCrop`` and ``RandomHorizontalFlip``.

Images come in two forms, as in torchvision:

* before ``ToTensor``: a NumPy array ``(H, W, C)`` or ``(H, W)`` (what
  ``ampc.vision.datasets`` returns; torchvision has a PIL image here, and
  ampc accepts PIL images too when Pillow is installed);
* after ``ToTensor``: an ampc ``Tensor`` ``(..., C, H, W)``.

Random transforms draw from ampc's generator, so ``ampc.manual_seed(n)``
makes them repeatable; inside DataLoader workers each worker is seeded
with ``base_seed + worker_id``.

Every transform here also has a batched form (``_batch``) that the
DataLoader uses for in-memory data sets: the same arithmetic on a whole
batch at once.  Deterministic transforms give bit-identical values both
ways; random ones draw the same distribution (one draw per image).

>>> import numpy as np
>>> import ampc.vision.transforms as T
>>> t = T.Compose([T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
>>> x = t(np.full((32, 32, 3), 255, dtype=np.uint8))
>>> x.shape, float(x.max())
(ampc.Size([3, 32, 32]), 1.0)
"""
import numbers

import numpy as np

from .. import _C
from .._creation import tensor as _tensor
from .._dtype_device import bfloat16, float32, int64
from ..tensor import Tensor
from ..utils.data._collate import _array_to_tensor

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop",
           "RandomHorizontalFlip"]

_PADDING_MODES = ("constant", "edge", "reflect", "symmetric")


# ----------------------------------------------------------------------------
# random draws from ampc's generator


def _randint(high, n):
    """n int64 values uniform in [0, high), from ampc's generator."""
    t = _C.empty((n,), int64, "cpu")
    _C.random_(t, "randint", 0, high)
    return t._numpy()


def _rand(n):
    """n float32 values uniform in [0, 1), from ampc's generator."""
    t = _C.empty((n,), float32, "cpu")
    _C.random_(t, "uniform", 0.0, 1.0)
    return t._numpy()


# ----------------------------------------------------------------------------
# image <-> array


def _is_pil(img):
    # Duck-typed so that Pillow stays an optional dependency.
    return hasattr(img, "getbands") and hasattr(img, "mode")


def _image_array(name, img):
    """(array, is_tensor): the pixels of a NumPy / PIL image (H, W[, C])
    or of a CPU tensor (..., H, W), as a NumPy array that shares memory
    where it can."""
    if isinstance(img, Tensor):
        if img.device.type != "cpu":
            raise TypeError(
                f"{name}(): expected a CPU tensor, got one on "
                f"{img.device}; move it with .cpu() first")
        if img.dtype is bfloat16:
            raise TypeError(
                f"{name}(): bfloat16 tensors are not supported; convert "
                "with .float() first")
        if img.ndim < 2:
            raise ValueError(
                f"{name}(): expected a tensor image of shape (..., H, W), "
                f"got shape {list(img.shape)}")
        return img.detach().numpy(), True
    if _is_pil(img):
        img = np.asarray(img)
    if not isinstance(img, np.ndarray):
        raise TypeError(
            f"{name}(): img should be a NumPy array (H, W, C), an ampc "
            f"Tensor (..., H, W) or a PIL Image, got {type(img).__name__}")
    if img.ndim not in (2, 3):
        raise ValueError(
            f"{name}(): expected a NumPy image of shape (H, W) or (H, W, C), "
            f"got shape {img.shape}")
    return img, False


def _wrap(arr, is_tensor):
    """Back to the caller's form: a tensor (sharing arr) or an array."""
    if is_tensor:
        return _C.from_numpy(np.ascontiguousarray(arr))
    return np.ascontiguousarray(arr)


# ----------------------------------------------------------------------------
# Compose


class Compose:
    """Apply transforms one after another.

    >>> import numpy as np
    >>> import ampc.vision.transforms as T
    >>> T.Compose([T.ToTensor()])(np.zeros((2, 2, 3), np.uint8)).shape
    ampc.Size([3, 2, 2])
    """

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


# ----------------------------------------------------------------------------
# ToTensor


class ToTensor:
    """An image (H, W, C) -> a tensor (C, H, W).  uint8 pixels become
    float32 in [0, 1] (divided by 255); other dtypes keep their values, as
    in torchvision (float64 becomes float32, ampc having no float64).

    Accepts NumPy arrays (what ampc's data sets return) and PIL images.

    >>> import numpy as np
    >>> import ampc.vision.transforms as T
    >>> T.ToTensor()(np.full((1, 1, 3), 51, np.uint8)).flatten()
    tensor([0.2000, 0.2000, 0.2000])
    """

    def __call__(self, pic):
        if isinstance(pic, Tensor):
            raise TypeError(
                "ToTensor(): pic should be a NumPy array or a PIL Image, got "
                "a Tensor (it is already one)")
        arr, _ = _image_array("ToTensor", pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        return _to_chw_tensor(arr.transpose(2, 0, 1))

    def _batch(self, x, is_tensor):
        if is_tensor:
            raise TypeError("ToTensor(): the images already are tensors")
        if x.ndim == 3:
            x = x[..., None]
        return _chw_values(x.transpose(0, 3, 1, 2)), True

    def __repr__(self):
        return "ToTensor()"


def _chw_values(chw):
    """CHW pixels -> a new C-contiguous array with ToTensor's values."""
    if chw.dtype == np.uint8:
        out = chw.astype(np.float32, order="C")
        # NOTE: a division, not a multiplication by 1/255, so the values
        # match torchvision's img.float().div(255) bit for bit.
        np.divide(out, np.float32(255), out=out)
        return out
    if chw.dtype == np.float64:
        return chw.astype(np.float32, order="C")
    return np.array(chw, order="C")


def _to_chw_tensor(chw):
    return _array_to_tensor(_chw_values(chw))


# ----------------------------------------------------------------------------
# Normalize


class Normalize:
    """``(x - mean) / std`` per channel of a float tensor (..., C, H, W).

    >>> import ampc
    >>> import ampc.vision.transforms as T
    >>> T.Normalize((0.5,), (0.5,))(ampc.ones(1, 1, 2))
    tensor([[[1., 1.]]])
    """

    def __init__(self, mean, std, inplace=False):
        self.mean = _channel_values("mean", mean)
        self.std = _channel_values("std", std)
        self.inplace = inplace

    def _stats(self, dtype, channels):
        mean = np.asarray(self.mean, dtype=dtype)
        std = np.asarray(self.std, dtype=dtype)
        for name, v in (("mean", mean), ("std", std)):
            if v.size not in (1, channels):
                raise ValueError(
                    f"Normalize(): {name} has {v.size} values but the image "
                    f"has {channels} channels")
        if (std == 0).any():
            raise ValueError(
                f"Normalize(): std evaluated to zero after conversion to "
                f"{dtype}, leading to division by zero.")
        return mean.reshape(-1, 1, 1), std.reshape(-1, 1, 1)

    def __call__(self, tensor):
        if not isinstance(tensor, Tensor):
            raise TypeError(
                "Normalize(): img should be an ampc Tensor (apply ToTensor "
                f"first), got {type(tensor).__name__}")
        if not tensor.dtype.is_floating_point:
            raise TypeError(
                "Normalize(): Input tensor should be a float tensor. Got "
                f"{tensor.dtype}.")
        if tensor.ndim < 3:
            raise ValueError(
                "Normalize(): Expected tensor to be a tensor image of size "
                f"(..., C, H, W). Got tensor.size() = {list(tensor.shape)}")
        if (tensor.device.type == "cpu" and tensor.dtype is not bfloat16
                and not tensor.requires_grad):
            arr = tensor.numpy()
            mean, std = self._stats(arr.dtype, arr.shape[-3])
            if self.inplace:
                np.subtract(arr, mean, out=arr)
                np.divide(arr, std, out=arr)
                return tensor
            out = np.subtract(arr, mean)
            np.divide(out, std, out=out)
            return _C.from_numpy(out)
        # Tensors NumPy cannot hold (bfloat16, CUDA) or that track
        # gradients: the same arithmetic with ampc's own ops.
        mean, std = self._stats(np.float32, tensor.shape[-3])
        mean = _tensor(mean, dtype=tensor.dtype, device=tensor.device)
        std = _tensor(std, dtype=tensor.dtype, device=tensor.device)
        if self.inplace:
            return tensor.sub_(mean).div_(std)
        return (tensor - mean) / std

    def _batch(self, x, is_tensor):
        if not is_tensor:
            raise TypeError("Normalize(): apply ToTensor first")
        mean, std = self._stats(x.dtype, x.shape[1])
        # x is the loader's own batch buffer: update it in place.
        np.subtract(x, mean, out=x)
        np.divide(x, std, out=x)
        return x, True

    def __repr__(self):
        return (f"Normalize(mean={self.mean}, std={self.std}, "
                f"inplace={self.inplace})")


def _channel_values(name, v):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, numbers.Number):
        v = (v,)
    try:
        vals = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        raise TypeError(
            f"Normalize(): {name} must be a number or a sequence of "
            f"numbers, got {v!r}") from None
    if not vals:
        raise ValueError(f"Normalize(): {name} must not be empty")
    return vals


# ----------------------------------------------------------------------------
# padding (RandomCrop's)


def _pad_arg(padding):
    """torchvision's padding forms -> (left, top, right, bottom)."""
    if isinstance(padding, numbers.Integral) and not isinstance(
            padding, bool):
        p = int(padding)
        out = (p, p, p, p)
    elif isinstance(padding, (list, tuple)) and len(padding) in (1, 2, 4) \
            and all(isinstance(p, numbers.Integral) for p in padding):
        p = [int(x) for x in padding]
        if len(p) == 1:
            out = (p[0],) * 4
        elif len(p) == 2:
            out = (p[0], p[1], p[0], p[1])
        else:
            out = tuple(p)
    else:
        raise TypeError(
            "RandomCrop(): padding must be an int or a sequence of 1, 2 or "
            f"4 ints, got {padding!r}")
    if min(out) < 0:
        raise ValueError(
            f"RandomCrop(): padding must be non-negative, got {padding!r}")
    return out


def _pad(arr, pad, fill, mode, hw, channel_axis):
    """Pad the (H, W) axes ``hw`` of arr by pad = (left, top, right,
    bottom); ``fill`` (a number, or one per channel) for 'constant'."""
    left, top, right, bottom = pad
    if not any(pad):
        return arr
    h_ax, w_ax = hw
    if mode != "constant":
        if mode == "reflect" and (top >= arr.shape[h_ax]
                                  or bottom >= arr.shape[h_ax]
                                  or left >= arr.shape[w_ax]
                                  or right >= arr.shape[w_ax]):
            raise ValueError(
                "RandomCrop(): padding_mode='reflect' needs each padding to "
                f"be smaller than the image side, got padding {pad} for an "
                f"image of {arr.shape[h_ax]}x{arr.shape[w_ax]}")
        widths = [(0, 0)] * arr.ndim
        widths[h_ax] = (top, bottom)
        widths[w_ax] = (left, right)
        return np.pad(arr, widths, mode=mode)
    shape = list(arr.shape)
    shape[h_ax] += top + bottom
    shape[w_ax] += left + right
    out = np.empty(shape, dtype=arr.dtype)
    out[...] = _fill_value(fill, arr, channel_axis)
    inner = [slice(None)] * arr.ndim
    inner[h_ax] = slice(top, top + arr.shape[h_ax])
    inner[w_ax] = slice(left, left + arr.shape[w_ax])
    out[tuple(inner)] = arr
    return out


def _fill_value(fill, arr, channel_axis):
    """fill broadcast against arr: a scalar, or one value per channel
    placed on ``channel_axis``."""
    if isinstance(fill, numbers.Number):
        return np.asarray(fill).astype(arr.dtype)
    vals = np.asarray(fill).astype(arr.dtype)
    channels = 1 if channel_axis is None else arr.shape[channel_axis]
    if vals.ndim != 1 or vals.size not in (1, channels):
        raise ValueError(
            f"RandomCrop(): fill must be a number or one value per channel "
            f"({channels}), got {fill!r}")
    if channel_axis is None:
        return vals[0]
    shape = [1] * arr.ndim
    shape[channel_axis] = vals.size
    return vals.reshape(shape)


# ----------------------------------------------------------------------------
# RandomCrop


class RandomCrop:
    """Crop a random (h, w) window, after optional padding.

    ``padding``: an int (all sides), (left/right, top/bottom) or (left,
    top, right, bottom); ``pad_if_needed`` pads images smaller than the
    crop; ``fill`` is the constant for ``padding_mode='constant'`` (a
    number or one per channel); the other modes are 'edge', 'reflect' and
    'symmetric', as in torchvision.

    >>> import numpy as np, ampc
    >>> import ampc.vision.transforms as T
    >>> _ = ampc.manual_seed(0)
    >>> T.RandomCrop(32, padding=4)(np.zeros((32, 32, 3), np.uint8)).shape
    (32, 32, 3)
    """

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0,
                 padding_mode="constant"):
        self.size = _size_arg(size)
        self.padding = None if padding is None else _pad_arg(padding)
        self._padding_arg = padding
        self.pad_if_needed = bool(pad_if_needed)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                "RandomCrop(): padding_mode should be one of 'constant', "
                f"'edge', 'reflect' or 'symmetric', got {padding_mode!r}")
        if not isinstance(fill, numbers.Number):
            if not isinstance(fill, (list, tuple)) or not all(
                    isinstance(v, numbers.Number) for v in fill):
                raise TypeError(
                    "RandomCrop(): fill must be a number or a sequence of "
                    f"numbers, got {fill!r}")
        self.fill = fill
        self.padding_mode = padding_mode

    def _prepare(self, arr, hw, channel_axis):
        """Padding and pad_if_needed, as torchvision applies them."""
        if self.padding is not None:
            arr = _pad(arr, self.padding, self.fill, self.padding_mode, hw,
                       channel_axis)
        th, tw = self.size
        h, w = arr.shape[hw[0]], arr.shape[hw[1]]
        if self.pad_if_needed and w < tw:
            arr = _pad(arr, (tw - w, 0, tw - w, 0), self.fill,
                       self.padding_mode, hw, channel_axis)
        if self.pad_if_needed and h < th:
            arr = _pad(arr, (0, th - h, 0, th - h), self.fill,
                       self.padding_mode, hw, channel_axis)
        h, w = arr.shape[hw[0]], arr.shape[hw[1]]
        if h < th or w < tw:
            raise ValueError(
                f"RandomCrop(): Required crop size {(th, tw)} is larger than "
                f"input image size {(h, w)}")
        return arr, h, w

    def __call__(self, img):
        arr, is_tensor = _image_array("RandomCrop", img)
        if is_tensor:
            hw, ch = (arr.ndim - 2, arr.ndim - 1), (
                arr.ndim - 3 if arr.ndim >= 3 else None)
        else:
            hw, ch = (0, 1), (2 if arr.ndim == 3 else None)
        arr, h, w = self._prepare(arr, hw, ch)
        th, tw = self.size
        if (h, w) == (th, tw):
            return _wrap(arr, is_tensor)
        i, j = int(_randint(h - th + 1, 1)[0]), int(_randint(w - tw + 1, 1)[0])
        window = [slice(None)] * arr.ndim
        window[hw[0]] = slice(i, i + th)
        window[hw[1]] = slice(j, j + tw)
        return _wrap(arr[tuple(window)], is_tensor)

    def _batch(self, x, is_tensor):
        # x: (B, C, H, W) tensor images or (B, H, W[, C]) NumPy images.
        if is_tensor:
            hw, ch = (2, 3), 1
        else:
            hw, ch = (1, 2), (3 if x.ndim == 4 else None)
        x, h, w = self._prepare(x, hw, ch)
        th, tw = self.size
        if (h, w) == (th, tw):
            return x, is_tensor
        n = x.shape[0]
        i = _randint(h - th + 1, n)
        j = _randint(w - tw + 1, n)
        return _gather_windows(x, i, j, th, tw, hw[0]), is_tensor

    def __repr__(self):
        return (f"RandomCrop(size={self.size}, padding={self._padding_arg}, "
                f"pad_if_needed={self.pad_if_needed}, fill={self.fill}, "
                f"padding_mode={self.padding_mode})")


def _gather_windows(x, i, j, th, tw, h_ax):
    """x[b, ..., i[b]:i[b]+th, j[b]:j[b]+tw, ...] for every b, as one
    array: (B, pre..., th, tw, post...) for x (B, pre..., H, W, post...).

    Each window is th * prod(pre) row segments, and a row segment (tw *
    prod(post) elements) is contiguous in a C-contiguous x.  Viewing x as
    overlapping fixed-size segments (one per element offset) turns the
    whole crop into one fancy-index gather of segments, each a memcpy,
    instead of an element-by-element gather.
    """
    x = np.ascontiguousarray(x)
    n, item = x.shape[0], x.itemsize
    pre, post = x.shape[1:h_ax], x.shape[h_ax + 2:]
    strides = [s // item for s in x.strides]
    seg = tw * int(np.prod(post, dtype=np.int64))
    # Element offset of every segment start, shaped (B, pre..., th).
    off = (np.arange(n) * strides[0] + i * strides[h_ax]
           + j * strides[h_ax + 1]).reshape((n,) + (1,) * (len(pre) + 1))
    for k, p in enumerate(pre):
        shape = [1] * (len(pre) + 2)
        shape[k + 1] = p
        off = off + (np.arange(p) * strides[k + 1]).reshape(shape)
    off = off + np.arange(th) * strides[h_ax]
    segments = np.ndarray((x.size - seg + 1,), np.dtype((np.void, seg * item)),
                          buffer=x, strides=(item,))
    out = segments[off.reshape(-1)]
    return out.view(x.dtype).reshape((n,) + pre + (th, tw) + post)


def _size_arg(size):
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        size = (int(size), int(size))
    elif isinstance(size, (list, tuple)) and len(size) in (1, 2) and all(
            isinstance(s, numbers.Integral) for s in size):
        size = (int(size[0]), int(size[-1]))
    else:
        raise TypeError(
            "RandomCrop(): size must be an int or a sequence of 1 or 2 ints, "
            f"got {size!r}")
    if min(size) <= 0:
        raise ValueError(
            f"RandomCrop(): size must be positive, got {size}")
    return size


# ----------------------------------------------------------------------------
# RandomHorizontalFlip


class RandomHorizontalFlip:
    """Mirror the image left-right with probability ``p``.

    >>> import numpy as np
    >>> import ampc.vision.transforms as T
    >>> T.RandomHorizontalFlip(p=1.0)(np.array([[1, 2, 3]]))
    array([[3, 2, 1]])
    """

    def __init__(self, p=0.5):
        if not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(
                f"RandomHorizontalFlip(): p must be a probability in [0, 1], "
                f"got {p!r}")
        self.p = float(p)

    def __call__(self, img):
        arr, is_tensor = _image_array("RandomHorizontalFlip", img)
        if _rand(1)[0] < self.p:
            w_ax = arr.ndim - 1 if is_tensor else 1
            return _wrap(np.flip(arr, axis=w_ax), is_tensor)
        return img

    def _batch(self, x, is_tensor):
        flip = _rand(x.shape[0]) < self.p
        w_ax = 3 if is_tensor else 2
        # x is the loader's own batch buffer: flip the chosen images in it.
        x[flip] = np.flip(x[flip], axis=w_ax)
        return x, is_tensor

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


# ----------------------------------------------------------------------------
# batching a pipeline (used by the DataLoader's fast path)

_BATCHABLE = (ToTensor, Normalize, RandomCrop, RandomHorizontalFlip)


def _batch_pipeline(transform):
    """The list of transforms to run batched for ``transform`` (None, one
    of the transforms above, or a Compose of them, applied to NumPy
    images), or None when it cannot be batched: an unknown or subclassed
    transform, or one in a place the per-image path would reject."""
    if transform is None:
        steps = []
    elif type(transform) is Compose:
        steps = list(transform.transforms)
    else:
        steps = [transform]
    is_tensor = False
    for t in steps:
        if type(t) not in _BATCHABLE:
            return None
        if isinstance(t, ToTensor) and is_tensor:
            return None          # ToTensor twice
        if isinstance(t, Normalize) and not is_tensor:
            return None          # Normalize before ToTensor
        is_tensor = is_tensor or isinstance(t, ToTensor)
    return steps


def _run_batch(steps, x):
    """Apply a batched pipeline to x, a batch of NumPy images (B, H, W[,
    C]) that the caller owns; returns an ampc tensor."""
    is_tensor = False
    for t in steps:
        x, is_tensor = t._batch(x, is_tensor)
    return _array_to_tensor(x)
