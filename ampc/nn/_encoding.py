"""``F.one_hot``: class indices as one-hot rows (an advanced-index write of
ones), with PyTorch's checks."""
from .. import _C
from .._dtype_device import int64

_TB = _C.TensorBase


def one_hot(tensor, num_classes=-1):
    """An int64 tensor of shape ``(*tensor.shape, num_classes)`` with a 1 at
    each class index of ``tensor`` (int64, non-negative) and 0 elsewhere;
    ``num_classes=-1`` takes the largest index plus one.  Checking the
    indices reads them back (a host sync on CUDA, as in PyTorch).

    >>> import ampc
    >>> ampc.nn.functional.one_hot(ampc.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    if not isinstance(tensor, _TB) or tensor.dtype is not int64:
        raise RuntimeError("one_hot is only applicable to index tensor of "
                           "type LongTensor.")
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) \
            or num_classes < -1:
        raise RuntimeError("one_hot(): num_classes should be -1 or a "
                           f"non-negative int, got {num_classes!r}")
    n = tensor.numel()
    if n == 0:
        if num_classes == -1:
            raise RuntimeError("Can not infer total number of classes from "
                               "empty tensor.")
    else:
        if tensor.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        top = tensor.max().item()
        if num_classes == -1:
            num_classes = top + 1
        elif top >= num_classes:
            raise RuntimeError("Class values must be smaller than "
                               "num_classes.")
    dev = "cpu" if tensor.device_type == "cpu" else \
        f"cuda:{tensor.device_index}"
    out = _C.full((n, num_classes), 0, int64, dev)
    if n:
        rows = _C.arange(0, n, 1, int64, dev)
        out[rows, tensor.reshape(n)] = 1
    return out.reshape(*tensor.shape, num_classes)
