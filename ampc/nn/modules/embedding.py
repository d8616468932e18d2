"""``Embedding``: a table of num_embeddings vectors of embedding_dim,
looked up by int64 indices (``F.embedding``); ``EmbeddingBag``: the
table's rows reduced per bag (``F.embedding_bag``).

>>> import ampc
>>> ampc.nn.Embedding(10, 3, padding_idx=0)
Embedding(10, 3, padding_idx=0)
"""
from ..._creation import empty
from ...autograd import no_grad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding", "EmbeddingBag"]


class Embedding(Module):
    """PyTorch's ``nn.Embedding``: weight (num_embeddings, embedding_dim)
    drawn from N(0, 1), the ``padding_idx`` row zeroed (and given no
    gradient); ``max_norm``, ``norm_type``, ``scale_grad_by_freq`` as
    ``F.embedding``.

    >>> import ampc
    >>> emb = ampc.nn.Embedding(5, 2)
    >>> emb(ampc.tensor([[0, 4, 4]])).shape
    ampc.Size([1, 3, 2])
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None,
                 max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 sparse=False, _weight=None, _freeze=False, device=None,
                 dtype=None):
        super().__init__()
        for name, v in (("num_embeddings", num_embeddings),
                        ("embedding_dim", embedding_dim)):
            if v.__class__ is bool or not isinstance(v, int) or v < 0:
                raise ValueError(f"Embedding(): {name} must be a "
                                 f"non-negative int, got {v!r}")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError(
                    "Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim,
                                          device=device, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError(
                    "Shape of weight does not match num_embeddings and "
                    "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        """N(0, 1) values, the padding row zeroed."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx,
                           self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None,
                        max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is ``embeddings`` (2-D), frozen unless
        ``freeze=False``."""
        if embeddings.ndim != 2:
            raise AssertionError(
                "Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type,
                   scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)


class EmbeddingBag(Module):
    """PyTorch's ``nn.EmbeddingBag``: a weight (num_embeddings,
    embedding_dim) drawn from N(0, 1) (the ``padding_idx`` row zeroed),
    reduced per bag by ``F.embedding_bag`` with ``mode`` 'sum', 'mean' or
    'max'.

    >>> import ampc
    >>> bag = ampc.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(ampc.tensor([1, 2, 4, 5]), ampc.tensor([0, 2])).shape
    ampc.Size([2, 3])
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, mode="mean",
                 sparse=False, _weight=None, include_last_offset=False,
                 padding_idx=None, device=None, dtype=None):
        super().__init__()
        # Embedding's checks, initialisation and padding row
        inner = Embedding(num_embeddings, embedding_dim, padding_idx,
                          _weight=_weight, device=device, dtype=dtype)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        self.padding_idx = inner.padding_idx
        self.weight = inner.weight

    def reset_parameters(self):
        """N(0, 1) values, the padding row zeroed."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm,
                               self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, mode="mean",
                        sparse=False, include_last_offset=False,
                        padding_idx=None):
        """An EmbeddingBag whose weight is ``embeddings`` (2-D), frozen
        unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise AssertionError(
                "Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode,
                  sparse, embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag
