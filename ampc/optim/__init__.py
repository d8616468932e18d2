"""``ampc.optim``: optimisers with PyTorch's names, options, state dicts
and errors (``import ampc.optim as optim``), and learning-rate schedules in
``ampc.optim.lr_scheduler``.

>>> import ampc
>>> import ampc.optim as optim
>>> model = ampc.nn.Linear(4, 2)
>>> opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
>>> type(opt).__name__
'SGD'
"""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .adagrad import Adagrad
from .rmsprop import RMSprop
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad",
           "lr_scheduler"]
