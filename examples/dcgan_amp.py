"""PyTorch's AMP recipe for several models, losses and optimizers, on a
small DCGAN: a generator of ConvTranspose2d layers and a discriminator of
Conv2d layers, trained against each other on ampc's built-in FakeCIFAR10
(no download).  One GradScaler serves both optimizers: each loss is scaled
and backpropagated, each optimizer stepped through the scaler (a step
whose gradients overflowed is skipped for that optimizer alone), and the
scale updated once per iteration, after both steps.  The loop is written as
for torch (``import ampc as torch``).  A few steps:

    python examples/dcgan_amp.py [--steps N] [--batch B]
"""
import argparse

import ampc as torch
import ampc.nn as nn
import ampc.vision.transforms as transforms
from ampc.vision.datasets import FakeCIFAR10

LATENT = 64


def generator():
    """z (N, LATENT, 1, 1) -> an image (N, 3, 32, 32) in [-1, 1]."""
    def up(cin, cout, stride, padding):
        return [nn.ConvTranspose2d(cin, cout, 4, stride, padding,
                                   bias=False),
                nn.BatchNorm2d(cout), nn.ReLU()]
    return nn.Sequential(*up(LATENT, 128, 1, 0), *up(128, 64, 2, 1),
                         *up(64, 32, 2, 1),
                         nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Tanh())


def discriminator():
    """An image (N, 3, 32, 32) -> one logit per image (N,)."""
    def down(cin, cout, norm):
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=not norm),
                *([nn.BatchNorm2d(cout)] if norm else []),
                nn.LeakyReLU(0.2)]
    return nn.Sequential(*down(3, 32, False), *down(32, 64, True),
                         *down(64, 128, True), nn.Conv2d(128, 1, 4),
                         nn.Flatten(0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    torch.manual_seed(0)
    transform = transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    data = FakeCIFAR10(train=True, size=args.steps * args.batch,
                       transform=transform)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch,
                                         drop_last=True)
    net_g, net_d = generator().to(device), discriminator().to(device)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    scaler = torch.amp.GradScaler(device.type)

    for step, (real, _) in enumerate(loader):
        real = real.to(device)
        n = real.shape[0]
        ones = torch.ones(n, device=device)
        zeros = torch.zeros(n, device=device)
        z = torch.randn(n, LATENT, 1, 1, device=device)

        # the discriminator: real images against detached fakes
        opt_d.zero_grad()
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            fake = net_g(z)
            loss_d = (criterion(net_d(real), ones) +
                      criterion(net_d(fake.detach()), zeros))
        scaler.scale(loss_d).backward()
        scaler.step(opt_d)

        # the generator: make the discriminator call its fakes real
        opt_g.zero_grad()
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            loss_g = criterion(net_d(fake), ones)
        scaler.scale(loss_g).backward()
        scaler.step(opt_g)

        scaler.update()                     # once, after both steps
        if step % 5 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss D {loss_d.item():.4f}  "
                  f"loss G {loss_g.item():.4f}  "
                  f"scale {scaler.get_scale():.0f}", flush=True)


if __name__ == "__main__":
    main()
