"""``pad_sequence``: variable-length sequences padded into one tensor, as
``torch.nn.utils.rnn.pad_sequence`` (differentiable: made of ``cat`` and
``stack``).

>>> import ampc
>>> from ampc.nn.utils.rnn import pad_sequence
>>> pad_sequence([ampc.ones(3, 2), ampc.ones(1, 2)]).shape
ampc.Size([3, 2, 2])
"""
from ... import _C
from ..._creation import cat, full, stack

__all__ = ["pad_sequence"]


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
