"""Variable-length sequences, as ``torch.nn.utils.rnn``: ``pad_sequence``,
``PackedSequence`` (the steps' rows, longest sequences first, with each
step's batch size), ``pack_padded_sequence``, ``pack_sequence`` and
``pad_packed_sequence``.  All of them are differentiable (slices, ``cat``
and ``stack``); the RNN modules take and return packed sequences.

>>> import ampc
>>> from ampc.nn.utils.rnn import pad_sequence, pack_padded_sequence
>>> pad_sequence([ampc.ones(3, 2), ampc.ones(1, 2)]).shape
ampc.Size([3, 2, 2])
>>> pack_padded_sequence(ampc.ones(3, 2, 1), [3, 1]).batch_sizes
tensor([2, 1, 1])
"""
from typing import NamedTuple, Optional

from ... import _C
from ..._creation import cat, full, stack, tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence",
           "pack_sequence", "pad_packed_sequence"]


class PackedSequence(NamedTuple):
    """data (sum of the lengths, *): step t's rows, one per sequence still
    running, longest first; batch_sizes (T,) int64; sorted_indices and
    unsorted_indices the batch's order by length and back (None when it
    came sorted)."""

    data: _C.TensorBase
    batch_sizes: _C.TensorBase
    sorted_indices: Optional[_C.TensorBase] = None
    unsorted_indices: Optional[_C.TensorBase] = None

    def to(self, *args, **kwargs):
        """data moved or cast by ``Tensor.to``; the indices follow it to
        its device, batch_sizes stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        dev = data.device

        def move(t):
            return None if t is None else t.to(dev)
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cuda(self):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    @property
    def is_cuda(self):
        return self.data.is_cuda


def pad_sequence(sequences, batch_first=False, padding_value=0.0,
                 padding_side="right"):
    """Stack sequences of shapes (L_i, *) into (T, B, *) (or (B, T, *) with
    ``batch_first``), T the longest L_i, padding each on ``padding_side``
    ('right' or 'left') with ``padding_value``."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(
            "Expected padding_side to be one of left or right, but got "
            f"{padding_side}.")
    if isinstance(sequences, _C.TensorBase):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        short = longest - s.shape[0]
        if short:
            pad = full((short,) + tuple(s.shape[1:]), padding_value,
                       dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s])
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def _lengths(lengths):
    if isinstance(lengths, _C.TensorBase):
        lengths = lengths.tolist()
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False,
                         enforce_sorted=True):
    """input (T, B, *) (or (B, T, *)) padded, lengths B ints: the packed
    sequence.  Unsorted lengths need ``enforce_sorted=False``."""
    lengths = _lengths(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    batch = input.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(
            "Expected `len(lengths)` to be equal to batch_size, but got "
            f"{len(lengths)} (batch_size={batch})")
    if min(lengths) <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an "
            "element in 'lengths' that is <= 0")
    if max(lengths) > input.shape[0]:
        raise RuntimeError(
            f"a length of {max(lengths)} is longer than the input's "
            f"{input.shape[0]} steps")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when "
                "`enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not "
                "need ONNX exportability.")
    else:
        order = sorted(range(batch), key=lambda i: -lengths[i])
        back = [0] * batch
        for k, i in enumerate(order):
            back[i] = k
        sorted_indices = tensor(order, device=input.device)
        unsorted_indices = tensor(back, device=input.device)
        input = input.index_select(1, sorted_indices)
        lengths = [lengths[i] for i in order]
    sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = cat([input[t, :b] for t, b in enumerate(sizes)])
    return PackedSequence(data, tensor(sizes), sorted_indices,
                          unsorted_indices)


def pack_sequence(sequences, enforce_sorted=True):
    """Sequences of shapes (L_i, *) packed (``pad_sequence`` then
    ``pack_padded_sequence``)."""
    return pack_padded_sequence(pad_sequence(sequences),
                                [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0,
                        total_length=None):
    """The packed sequence back as (padded (T, B, *) or (B, T, *), lengths
    (B,) int64), in the batch's original order; ``total_length`` pads to
    that many steps."""
    data, sizes = sequence.data, sequence.batch_sizes.tolist()
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the "
                "longest sequence in input, but got total_length="
                f"{total_length} and max sequence length being {steps}")
        steps = total_length
    batch, rows, start = sizes[0], [], 0
    tail = tuple(data.shape[1:])
    for t in range(steps):
        b = sizes[t] if t < len(sizes) else 0
        row = data[start:start + b]
        start += b
        if b < batch:
            row = cat([row, full((batch - b,) + tail, padding_value,
                                 dtype=data.dtype, device=data.device)])
        rows.append(row)
    padded = stack(rows)
    lengths = [sum(1 for b in sizes if b > i) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in sequence.unsorted_indices.tolist()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lengths)
