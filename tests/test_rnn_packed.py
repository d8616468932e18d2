"""Packed sequences: PackedSequence, pack_padded_sequence, pack_sequence
and pad_packed_sequence as torch's, and the RNN modules over them (each
sequence's h_n at its own last step, backwards from its own end)."""
import numpy as np
import pytest

import ampc
from ampc import nn
from ampc.nn.utils.rnn import (PackedSequence, pack_padded_sequence,
                               pack_sequence, pad_packed_sequence)

try:
    import torch
    from torch.nn.utils import rnn as trnn
except ImportError:     # the torch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def test_pack_and_pad_round_trip():
    x = ampc.arange(12.0).reshape(4, 3, 1).requires_grad_()
    p = pack_padded_sequence(x, [4, 2, 3], enforce_sorted=False)
    assert isinstance(p, PackedSequence)
    assert p.batch_sizes.tolist() == [3, 3, 2, 1]
    assert p.sorted_indices.tolist() == [0, 2, 1]
    assert p.data[:, 0].tolist() == [0, 2, 1, 3, 5, 4, 6, 8, 9]
    y, lengths = pad_packed_sequence(p, batch_first=True, padding_value=-1,
                                     total_length=5)
    assert lengths.tolist() == [4, 2, 3]
    assert y.shape == (3, 5, 1)
    assert y[1, :, 0].tolist() == [1, 4, -1, -1, -1]
    y.sum().backward()
    assert x.grad[:, 1, 0].tolist() == [1, 1, 0, 0]
    p = pack_sequence([ampc.ones(3), ampc.ones(2)])
    assert p.batch_sizes.tolist() == [2, 2, 1] and p.sorted_indices is None


def test_packing_errors_are_torchs():
    x = ampc.zeros(4, 3, 1)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing "
                                           "order when `enforce_sorted`"):
        pack_padded_sequence(x, [2, 4, 3])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        pack_padded_sequence(x, [4, 0, 3], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to "
                                           "be equal to batch_size"):
        pack_padded_sequence(x, [4, 3])
    with pytest.raises(ValueError, match="Expected total_length to be at "
                                         "least the length of the longest"):
        pad_packed_sequence(pack_padded_sequence(x, [4, 3, 1]),
                            total_length=2)


def test_a_packed_batch_of_equal_lengths_is_the_padded_run():
    m = nn.GRU(3, 4, bidirectional=True)
    x = ampc.randn(5, 2, 3)
    out, h = m(x)
    pout, ph = m(pack_padded_sequence(x, [5, 5]))
    padded, _ = pad_packed_sequence(pout)
    assert np.array_equal(padded.detach().numpy(), out.detach().numpy())
    assert np.array_equal(ph.detach().numpy(), h.detach().numpy())


@needs_torch
@pytest.mark.parametrize("name,kw", [
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"bidirectional": True, "batch_first": True}),
    ("RNN", {"nonlinearity": "relu"}),
    ("LSTM", {"proj_size": 2, "bidirectional": True})])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_modules_over_packed_sequences_match_torch(name, kw, enforce_sorted):
    torch.manual_seed(0)
    tm, am = getattr(torch.nn, name)(3, 5, **kw), getattr(nn, name)(3, 5,
                                                                     **kw)
    am.load_state_dict({k: ampc.tensor(v.detach().numpy())
                        for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    bf = kw.get("batch_first", False)
    x = rng.standard_normal((4, 6, 3) if bf else (6, 4, 3)).astype(
        np.float32)
    lengths = [6, 4, 3, 1] if enforce_sorted else [3, 6, 1, 4]
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h0 = rng.standard_normal((layers, 4, kw.get("proj_size") or 5)).astype(
        np.float32)
    c0 = rng.standard_normal((layers, 4, 5)).astype(np.float32)
    tx, ax = torch.tensor(x, requires_grad=True), ampc.tensor(
        x, requires_grad=True)
    th, ah = torch.tensor(h0, requires_grad=True), ampc.tensor(
        h0, requires_grad=True)
    thx = (th, torch.tensor(c0)) if name == "LSTM" else th
    ahx = (ah, ampc.tensor(c0)) if name == "LSTM" else ah
    tout, thn = tm(trnn.pack_padded_sequence(tx, lengths, bf,
                                             enforce_sorted), thx)
    aout, ahn = am(pack_padded_sequence(ax, lengths, bf, enforce_sorted),
                   ahx)
    tpad, tlen = trnn.pad_packed_sequence(tout, bf)
    apad, alen = pad_packed_sequence(aout, bf)
    assert alen.tolist() == tlen.tolist()
    np.testing.assert_allclose(apad.detach().numpy(), tpad.detach().numpy(),
                               atol=2e-5)
    if name == "LSTM":
        thn, ahn = thn[1], ahn[1]
    np.testing.assert_allclose(ahn.detach().numpy(), thn.detach().numpy(),
                               atol=2e-5)
    ((tpad ** 2).sum() + (thn * 3).sum()).backward()
    ((apad * apad).sum() + (ahn * 3).sum()).backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), atol=2e-5)
    np.testing.assert_allclose(ah.grad.numpy(), th.grad.numpy(), atol=2e-5)
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(getattr(am, n).grad.numpy(),
                                   p.grad.numpy(), atol=2e-5, err_msg=n)


@needs_torch
def test_pack_sequence_matches_torch():
    rng = np.random.default_rng(1)
    seqs = [rng.standard_normal((n, 2)).astype(np.float32) for n in (2, 5, 3)]
    got = pack_sequence([ampc.tensor(s) for s in seqs], enforce_sorted=False)
    want = trnn.pack_sequence([torch.tensor(s) for s in seqs],
                              enforce_sorted=False)
    for a, t in zip(got, want):
        assert np.array_equal(a.numpy(), t.numpy())
