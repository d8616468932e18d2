"""The lab's model: the SimpleCNN of the lab's two scripts, layer for layer.

>>> import ampc
>>> from ampc.lab.model import SimpleCNN
>>> SimpleCNN()(ampc.zeros(2, 3, 32, 32)).shape
ampc.Size([2, 10])
"""
from .. import flatten
from .. import nn

__all__ = ["SimpleCNN"]


class SimpleCNN(nn.Module):
    """Two 3x3 convolutions (3 -> 32 -> 64 channels), each followed by ReLU
    and a 2x2 max-pool, then a 4096 -> 512 -> 10 classifier: input
    (N, 3, 32, 32) images, output (N, 10) logits; 2,122,186 parameters.

    >>> import ampc
    >>> model = SimpleCNN()
    >>> sum(p.numel() for p in model.parameters())
    2122186
    """

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2)
        )
        self.classifier = nn.Sequential(
            nn.Linear(64 * 8 * 8, 512),
            nn.ReLU(),
            nn.Linear(512, 10)
        )

    def forward(self, x):
        x = self.features(x)
        x = flatten(x, 1)
        x = self.classifier(x)
        return x
