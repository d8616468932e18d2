"""PyTorch's AMP "gradient penalty" recipe on the lab's SimpleCNN: the
gradients of the scaled loss, taken with create_graph=True, are unscaled by
hand, their norm is added to the loss under autocast, and the penalised
loss goes through the usual scale / backward / step / update.  The loop is
written as for torch (``import ampc as torch``); the model is the lab's
(ampc.lab.model) and the data ampc's built-in FakeCIFAR10 (no download).
A few steps:

    python examples/gradient_penalty.py [--steps N] [--batch B]
"""
import argparse

import ampc as torch
import ampc.nn as nn
import ampc.vision.transforms as transforms
from ampc.lab.model import SimpleCNN
from ampc.vision.datasets import FakeCIFAR10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    transform = transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    data = FakeCIFAR10(train=True, size=args.steps * args.batch,
                       transform=transform)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch)
    model = SimpleCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type)

    for step, (inputs, labels) in enumerate(loader):
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type=device.type, dtype=torch.float16):
            loss = criterion(model(inputs), labels)

        # the gradients of the scaled loss, with a graph of their own
        scaled_grads = torch.autograd.grad(scaler.scale(loss),
                                           model.parameters(),
                                           create_graph=True)
        inv_scale = 1.0 / scaler.get_scale()
        grads = [g * inv_scale for g in scaled_grads]

        with torch.autocast(device_type=device.type, dtype=torch.float16):
            grad_norm = 0
            for g in grads:
                grad_norm += g.pow(2).sum()
            grad_norm = grad_norm.sqrt()
            penalised = loss + 0.01 * grad_norm

        scaler.scale(penalised).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % 5 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}  "
                  f"grad norm {grad_norm.item():.4f}  "
                  f"scale {scaler.get_scale():.0f}")


if __name__ == "__main__":
    main()
