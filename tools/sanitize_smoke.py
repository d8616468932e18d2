"""Every kind of ampc CUDA kernel once, on small odd shapes, for
compute-sanitizer: run under ``compute-sanitizer --tool memcheck`` it finds
out-of-bounds and misaligned accesses that a test can miss (a read past
the end that happens to return a plausible value).  The cases cover the
element-wise, reduction, copy and random kernels (broadcast, strided,
offset and misaligned views), the scans and sorts, the NN kernels forward
and backward, the optimizer steps, the AMP unscale and scale update, GEMM
and convolution through cuBLAS(Lt) and cuDNN, and a captured graph.  Each case runs even
when an earlier one raised; the exit code is 1 when any raised.  Not a
test (tools/gpu_check.sh runs it); ``--device cpu`` checks the script
itself on a machine without a GPU.

    compute-sanitizer --tool memcheck python tools/sanitize_smoke.py
"""
import argparse
import sys
import traceback

import ampc
import ampc.nn.functional as F

DTYPES = (ampc.float32, ampc.float16, ampc.bfloat16)


def elementwise(dev):
    for dt in DTYPES:
        a = ampc.randn(7, 13, device=dev).to(dt)
        b = ampc.randn(13, device=dev).to(dt)
        off = ampc.randn(7 * 13 + 1, device=dev).to(dt)[1:].view(7, 13)
        for x in (a, a.t().contiguous().t(), off):
            (x + b, x * 2.5, x / b, x - 1, -x, x.abs(), x.exp(), x.sqrt(),
             x.log(), x.relu(), x == b, x < 0.5, ampc.isfinite(x),
             ampc.maximum(x, b), x.clamp(-0.5, 0.5))
        off.add_(b)
        a[:, 1:].mul_(a[:, :1])
    i = ampc.randint(-5, 5, (9, 5), device=dev)
    (i + 3, i * i, i == 1, i.float(), (i > 0).float(), i.sum(dim=0))


def reductions(dev):
    for dt in DTYPES:
        x = ampc.randn(5, 33, 7, device=dev).to(dt)
        for dim in (0, 1, 2, None):
            kw = {} if dim is None else {"dim": dim}
            x.sum(**kw), x.mean(**kw), x.max(**kw)
            if dim is not None:
                x.argmax(dim=dim, keepdim=True)
        x[:, ::2].sum(dim=1)
        ampc.zeros(0, 3, device=dev).to(dt).sum(dim=0)


def copies(dev):
    src = ampc.randn(6, 11, device=dev)
    for dt in (*DTYPES, ampc.int64, ampc.bool):
        y = src.to(dt)
        for dt2 in (*DTYPES, ampc.int64, ampc.bool):
            y.to(dt2)
            y.t().to(dt2).contiguous()
            y[1:, 3:].to(dt2)
    ampc.cat([src, src[:2]], dim=0)
    ampc.stack([src, src * 2], dim=1)
    src.cpu()
    ampc.tensor([1.5, 2.5, 3.0], device=dev)
    ampc.full((3, 5), 2.0, device=dev)
    ampc.arange(17, device=dev)
    h = ampc.randn(1000).pin_memory() if dev != "cpu" else ampc.randn(1000)
    h.to(dev, non_blocking=True)


def random_draws(dev):
    ampc.manual_seed(3)
    ampc.rand(1001, device=dev)
    ampc.randn(3, 333, device=dev, dtype=ampc.float16)
    ampc.randint(0, 10, (77,), device=dev)
    x = ampc.ones(4, 257, device=dev, requires_grad=True)
    F.dropout(x, 0.3).sum().backward()


def indexing(dev):
    for dt in DTYPES:
        x = ampc.randn(37, 5, 3, device=dev).to(dt).requires_grad_()
        rows = ampc.tensor([36, 0, -1, 7, 7], device=dev)
        y = x[rows, 1:] + x[:, [4, 0]].sum() + x[x.detach() > 0].sum()
        y.float().sum().backward()
        z = x.detach().clone()
        z[z > 0] = 0.0
        z[rows, :, [2, 0, 1, 1, 2]] = 1.0
    ampc.zeros(5, dtype=ampc.int64, device=dev).index_put_(
        (ampc.tensor([4, 0, 4, 4], device=dev),),
        ampc.ones(4, dtype=ampc.int64, device=dev), accumulate=True)
    (ampc.rand(4097 * 3, device=dev) > 0.5).nonzero()


def scans_and_sorts(dev):
    for dt in DTYPES:
        x = ampc.randn(33, 1031, device=dev).to(dt)
        x.cumsum(1), x.cumprod(0), x.sort(1), x.argsort(0), x.topk(5, 0)
        x.cummax(1), x.cummin(0), x.histc(37, -1, 1)
        x.cummax(0).values.float().sum()
    b = ampc.rand(7, 300, device=dev) > 0.5
    b.cumsum(1), b.sort(1), b.topk(3), b.cummax(1)


def nn_ops(dev):
    for dt in DTYPES:
        x = ampc.randn(3, 5, 9, 11, device=dev).to(dt).requires_grad_()
        y = F.max_pool2d(F.relu(x), 3, stride=2, padding=1, ceil_mode=True)
        y.sum().backward()
        # second derivatives: the pooling's gather (max_pool2d_gather)
        g, = ampc.autograd.grad((F.max_pool2d(x, 2) ** 2).float().sum(), x,
                                create_graph=True)
        ampc.autograd.grad(g.float().pow(2).sum(), x)
        (F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                      count_include_pad=False).float().sum()
         + F.adaptive_avg_pool2d(x, (4, 7)).float().sum()
         + F.adaptive_max_pool2d(x, (4, 13)).float().sum()).backward()
        # interpolate's kernels: bicubic up, antialiased down, trilinear
        (F.interpolate(x, size=(13, 4), mode="bicubic").float().sum()
         + F.interpolate(x, scale_factor=0.4, mode="bilinear",
                         antialias=True).float().sum()
         + F.interpolate(x.unsqueeze(2), size=(2, 7, 5),
                         mode="trilinear").float().sum()).backward()
        w = ampc.randn(50, 33, device=dev).to(dt).requires_grad_()
        ix = ampc.tensor([3, 0, 49, 3, 7, 7, 12], device=dev)
        off = ampc.tensor([0, 2, 2, 5], device=dev)
        for mode in ("sum", "mean", "max"):
            F.embedding_bag(ix, w, off, mode=mode,
                            padding_idx=7).float().sum().backward()
        z = ampc.randn(6, 10, device=dev).to(dt).requires_grad_()
        t = ampc.tensor([0, 3, 9, 1, 5, 2], device=dev)
        w = ampc.rand(10, device=dev).to(dt)
        (F.cross_entropy(z, t, weight=w, ignore_index=3,
                         label_smoothing=0.1)
         + F.nll_loss(F.log_softmax(z, dim=1), t, reduction="sum")
         + F.softmax(z, dim=0).sum()
         + F.mse_loss(z, z.detach() * 0.5)).float().backward()
        # normalisation: narrow and wide planes, float32 parameters with a
        # 16-bit input, running statistics, a row longer than a warp's pass
        for shape in ((7, 5), (3, 5, 9, 11)):
            xn = ampc.randn(*shape, device=dev).to(dt).requires_grad_()
            c = shape[1]
            wn = ampc.rand(c, device=dev).requires_grad_()
            rm, rv = ampc.zeros(c, device=dev), ampc.ones(c, device=dev)
            (F.batch_norm(xn, rm, rv, wn, wn * 0.5, training=True).float()
             .pow(2).sum() + F.batch_norm(xn, rm, rv, wn).float().sum()
             ).backward()
        xl = ampc.randn(5, 1031, device=dev).to(dt).requires_grad_()
        wl = ampc.rand(1031, device=dev).to(dt).requires_grad_()
        F.layer_norm(xl, (1031,), wl, wl).float().pow(2).sum().backward()
        # group norm: odd planes, float32 parameters with a 16-bit input
        xg = ampc.randn(3, 6, 7, 5, device=dev).to(dt).requires_grad_()
        wg = ampc.rand(6, device=dev).requires_grad_()
        F.group_norm(xg, 3, wg, wg * 0.5).float().pow(2).sum().backward()


def linalg(dev):
    for dt in DTYPES:
        x = ampc.randn(5, 37, device=dev).to(dt).requires_grad_()
        w = ampc.randn(19, 37, device=dev).to(dt).requires_grad_()
        b = ampc.randn(19, device=dev).to(dt).requires_grad_()
        F.linear(x, w, b).relu().sum().float().backward()
        ampc.matmul(ampc.randn(2, 1, 5, 3, device=dev).to(dt),
                    ampc.randn(4, 3, 7, device=dev).to(dt))
        im = ampc.randn(2, 3, 13, 11, device=dev).to(dt).requires_grad_()
        k = ampc.randn(5, 3, 3, 3, device=dev).to(dt).requires_grad_()
        kb = ampc.randn(5, device=dev).to(dt).requires_grad_()
        F.relu(F.conv2d(im, k, kb, stride=2, padding=1)).sum().float() \
            .backward()
        # grouped and depthwise (x2), through cuDNN and the im2col path
        gx = ampc.randn(2, 6, 9, 7, device=dev).to(dt).requires_grad_()
        for shape, groups in (((4, 3, 3, 3), 2), ((12, 1, 3, 3), 6)):
            gk = ampc.randn(*shape, device=dev).to(dt).requires_grad_()
            for enabled in (True, False):
                with ampc.backends.cudnn.flags(enabled=enabled):
                    F.conv2d(gx, gk, padding=1, groups=groups).sum() \
                        .float().backward()


def optimizers_and_amp(dev):
    for fused in (False, True):
        # a 4303-element weight crosses the optimizers' 4096-element
        # chunks
        model = ampc.nn.Sequential(ampc.nn.Linear(13, 331),
                                   ampc.nn.ReLU(),
                                   ampc.nn.Linear(331, 3)).to(dev)
        x = ampc.randn(9, 13, device=dev)
        # fused: the steps also write the weights' kept float16 copies
        casts = (ampc.amp.keep_weight_casts(model, dtype=ampc.float16)
                 if fused else None)
        for opt in (ampc.optim.SGD(model.parameters(), lr=0.1,
                                   momentum=0.9, fused=fused),
                    ampc.optim.Adam(model.parameters(), lr=1e-3,
                                    fused=fused),
                    ampc.optim.AdamW(model.parameters(), lr=1e-3,
                                     amsgrad=True, fused=fused),
                    ampc.optim.RMSprop(model.parameters(), lr=1e-3,
                                       momentum=0.9, centered=True,
                                       capturable=fused),
                    ampc.optim.Adagrad(model.parameters(), lr=1e-2,
                                       fused=fused)):
            scaler = ampc.amp.GradScaler(dev, init_scale=2.0 ** 10)
            for step in range(2):
                opt.zero_grad()
                with ampc.autocast(dev, dtype=ampc.float16):
                    loss = model(x).float().pow(2).mean()
                scaler.scale(loss).backward()
                if step == 0:
                    scaler.unscale_(opt)
                    ampc.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                else:           # the fused unscale-and-clip
                    scaler.clip_grad_norm_(opt, 1.0)
                scaler.step(opt)
                scaler.update()
            scaler.stats()
        if casts is not None:
            casts.release()


def graph(dev):
    if dev == "cpu":
        return
    x = ampc.randn(33, 17, device=dev)
    y = (x * 2 + 1).relu()
    g = ampc.cuda.CUDAGraph()
    with ampc.cuda.graph(g):
        y = (x * 2 + 1).relu()
        d = F.dropout(x, 0.5)
    g.replay()
    g.replay()
    ampc.cuda.synchronize()
    del y, d


# the library-heavy cases last: memcheck is slowest under cuBLAS and cuDNN
CASES = (elementwise, reductions, copies, random_draws, indexing,
         scans_and_sorts, nn_ops, graph, optimizers_and_amp, linalg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    failed = []
    for case in CASES:
        try:
            case(args.device)
            if args.device != "cpu":
                ampc.cuda.synchronize()
            print(f"ok   {case.__name__}", flush=True)
        except Exception:  # noqa: BLE001 - every case runs; all are named
            failed.append(case.__name__)
            print(f"FAIL {case.__name__}\n{traceback.format_exc()}",
                  flush=True)
    print(f"sanitize_smoke: {len(CASES) - len(failed)} of {len(CASES)} "
          f"cases ran cleanly" + (f"; raised: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
