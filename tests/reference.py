"""The float64 NumPy oracle: what every tensor op should compute, before
rounding to the output dtype, plus the dtype tools (float16 through NumPy,
bfloat16 through the uint32 bit formula of design.md §9) and PyTorch's
type-promotion rules.  Numerics here are on purpose; nowhere else.

Dtypes are named by string ('float32', 'float16', 'bfloat16', 'int64',
'bool') so that this module does not import ampc.
"""
import numpy as np

FLOATS = ("float32", "float16", "bfloat16")
ALL = ("float32", "float16", "bfloat16", "int64", "bool")

# machine epsilon (2^-mantissa bits) per dtype
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7,
       "int64": 0.0, "bool": 0.0}

# ----------------------------------------------------------------------------
# rounding to a dtype


def bf16_bits(x):
    """float32 values -> bfloat16 bit patterns (uint16), round to nearest
    even; NaN stays NaN (quiet, sign kept)."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    quiet = ((u >> 16) | 0x40)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_f32(bits):
    """bfloat16 bit patterns (uint16) -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_bf16(x):
    """float64/float32 values rounded to bfloat16, as float64.  Like
    PyTorch, float64 goes through float32 first."""
    return bf16_to_f32(bf16_bits(np.asarray(x, dtype=np.float32))) \
        .astype(np.float64)


def round_to(x, dtype):
    """Round float64 values to ``dtype`` and return them as float64 (the
    values a tensor of that dtype can hold)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "float32":
            return x.astype(np.float32).astype(np.float64)
        if dtype == "float16":
            return x.astype(np.float16).astype(np.float64)
        if dtype == "bfloat16":
            return round_bf16(x)
    if dtype == "int64":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(np.int64).astype(np.float64)
    if dtype == "bool":
        return (x != 0).astype(np.float64)
    raise ValueError(dtype)


def cast(x, src, dst):
    """The values of casting a ``src`` tensor with values x (float64) to
    ``dst``: floats round to nearest even (float16 overflows to inf), float
    to int truncates toward zero, anything to bool is x != 0."""
    x = np.asarray(x, dtype=np.float64)
    if dst in FLOATS:
        if src == "int64":
            # int64 -> float goes int64 -> float32 -> narrow in ampc and torch
            x = x.astype(np.float32).astype(np.float64)
        return round_to(x, dst)
    return round_to(x, dst)


# ----------------------------------------------------------------------------
# type promotion (PyTorch's rules for the five dtypes)

_CATEGORY = {"bool": 0, "int64": 1, "float16": 2, "bfloat16": 2,
             "float32": 2}


def promote(a, b):
    """Result dtype of two tensors of dtypes a and b (same ndim class)."""
    if a == b:
        return a
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    # both float, different: float16 with bfloat16 -> float32, else wider
    return "float32"


def scalar_kind(x):
    if isinstance(x, bool):
        return 0
    if isinstance(x, int):
        return 1
    return 2


def promote_scalar(t, s):
    """Result dtype of a tensor of dtype t with a Python scalar s."""
    ks = scalar_kind(s)
    if ks > _CATEGORY[t]:
        return "int64" if ks == 1 else "float32"
    return t


# ----------------------------------------------------------------------------
# ops (float64 in, float64 out)

def binary(op, a, b):
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b
        if op == "maximum":
            return np.maximum(a, b)
        if op == "minimum":
            return np.minimum(a, b)
        if op == "pow":
            return np.power(a, b)
    raise ValueError(op)


def where(cond, a, b):
    """cond ? a : b, broadcast: a select, so values (and bit patterns, when
    a and b are raw bits) pass through unchanged."""
    return np.where(np.asarray(cond) != 0, a, b)


def compare(op, a, b):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less,
            "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}[op](a, b)


def unary(op, a):
    with np.errstate(all="ignore"):
        if op == "neg":
            return -a
        if op == "abs":
            return np.abs(a)
        if op == "sqrt":
            return np.sqrt(a)
        if op == "exp":
            return np.exp(a)
        if op == "log":
            return np.log(a)
        if op == "relu":
            return np.where(np.isnan(a), a, np.maximum(a, 0))
        if op == "sign":
            return np.where(np.isnan(a), 0.0, np.sign(a))
        if op == "sigmoid":
            return 1.0 / (1.0 + np.exp(-a))
        if op == "tanh":
            return np.tanh(a)
        if op == "isfinite":
            return np.isfinite(a)
    raise ValueError(op)


def clamp(a, lo, hi):
    out = a
    if lo is not None:
        out = np.where(np.isnan(out), out, np.maximum(out, lo))
    if hi is not None:
        out = np.where(np.isnan(out), out, np.minimum(out, hi))
    return out


def _first_arg(a, dim, which):
    """argmax/argmin with NaN winning and the first occurrence kept."""
    nan = np.isnan(a)
    if dim is None:
        flat = a.ravel()
        fnan = nan.ravel()
        if fnan.any():
            return np.int64(np.argmax(fnan))
        return np.int64(np.argmax(flat) if which == "max"
                        else np.argmin(flat))
    idx = np.argmax(a, axis=dim) if which == "max" else \
        np.argmin(a, axis=dim)
    if nan.any():
        has = nan.any(axis=dim)
        idx = np.where(has, np.argmax(nan, axis=dim), idx)
    return idx


def reduce(op, a, dim=None, keepdim=False):
    """sum/mean/max/min/argmax/argmin like PyTorch (NaN wins max/min)."""
    axis = dim
    if op == "sum":
        return np.sum(a, axis=axis, keepdims=keepdim)
    if op == "mean":
        with np.errstate(all="ignore"):
            return np.mean(a, axis=axis, keepdims=keepdim)
    if op in ("max", "min"):
        f = np.max if op == "max" else np.min
        return f(a, axis=axis, keepdims=keepdim)    # NaN propagates
    if op in ("argmax", "argmin"):
        r = _first_arg(a, dim, op[3:])
        if keepdim and dim is not None:
            r = np.expand_dims(r, dim)
        elif keepdim:
            r = np.reshape(r, (1,) * a.ndim)
        return r
    raise ValueError(op)


# ----------------------------------------------------------------------------
# tolerances

def tolerance(dtype, k=1):
    """(rtol, atol) for results rounded to dtype after a k-term float32
    computation: a few ulps of the dtype, growing like sqrt(k)."""
    if dtype in ("int64", "bool"):
        return 0.0, 0.0
    eps = EPS[dtype]
    r = 2.0 * eps + 8 * 2.0 ** -24 * np.sqrt(k)
    return r, r


# ----------------------------------------------------------------------------
# linear algebra: linear, matmul, conv2d and their gradients (float64; the
# convolution by shifted slices, an algorithm independent of ampc's im2col)

def linear(x, w, b=None, relu=False):
    """x (*, IN) @ w (OUT, IN)^T + b, then ReLU (NaN kept) when relu."""
    y = np.matmul(x, w.T)
    if b is not None:
        y = y + b
    if relu:
        y = np.where(np.isnan(y), y, np.maximum(y, 0.0))
    return y


def linear_backward(go, x, w):
    """(grad_x, grad_w, grad_b) of y = x @ w.T + b for grad_out go."""
    rows = int(np.prod(x.shape[:-1]))
    g2 = go.reshape(rows, w.shape[0])
    x2 = x.reshape(rows, w.shape[1])
    return (np.matmul(go, w), g2.T @ x2, g2.sum(axis=0))


def matmul(a, b):
    """torch.matmul (NumPy's matmul has the same rules)."""
    return np.matmul(a, b)


def _conv_geometry(x, w, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return oh, ow


def _window(xp, i, j, oh, ow, stride, dilation):
    """The slice of padded input xp that kernel tap (i, j) reads."""
    (sh, sw), (dh, dw) = stride, dilation
    return (slice(None), slice(None),
            slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
            slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
           relu=False, groups=1):
    """x (N, C, H, W), w (OC, C/groups, KH, KW) -> (N, OC, OH, OW); group
    g's outputs [g*OC/G, (g+1)*OC/G) read input channels [g*C/G,
    (g+1)*C/G)."""
    oh, ow = _conv_geometry(x, w, stride, padding, dilation)
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    cg, ocg = x.shape[1] // groups, w.shape[0] // groups
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * ocg:(g + 1) * ocg]
        for i in range(w.shape[2]):
            for j in range(w.shape[3]):
                patch = xg[_window(xg, i, j, oh, ow, stride, dilation)]
                y[:, g * ocg:(g + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw", patch, wg[:, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    if relu:
        y = np.where(np.isnan(y), y, np.maximum(y, 0.0))
    return y


def conv2d_backward(go, x, w, stride=(1, 1), padding=(0, 0),
                    dilation=(1, 1), groups=1):
    """(grad_x, grad_w, grad_b) of conv2d for grad_out go."""
    oh, ow = go.shape[2:]
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    cg, ocg = x.shape[1] // groups, w.shape[0] // groups
    for g in range(groups):
        cs, os_ = slice(g * cg, (g + 1) * cg), slice(g * ocg, (g + 1) * ocg)
        gog = go[:, os_]
        for i in range(w.shape[2]):
            for j in range(w.shape[3]):
                win = _window(xp, i, j, oh, ow, stride, dilation)
                gxp[:, cs][win] += np.einsum("nohw,oc->nchw", gog,
                                             w[os_, :, i, j])
                gw[os_, :, i, j] = np.einsum("nohw,nchw->oc", gog,
                                             xp[:, cs][win])
    gx = gxp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]
    return gx, gw, go.sum(axis=(0, 2, 3))


# ----------------------------------------------------------------------------
# NN kernels: relu backward, max_pool2d, softmax, losses, optimizer steps
# (torch's formulas in float64; class-index losses take int64 targets)


def relu_backward(grad, out):
    """The gradient of relu from its output: 0 where out <= 0 (a NaN
    output passes the gradient, as torch's threshold_backward)."""
    return np.where(np.asarray(out) <= 0, 0.0, grad)


def pool_out_size(size, k, pad, stride, dil, ceil_mode=False):
    """torch's pooling_output_shape for one spatial dim."""
    num = size + 2 * pad - dil * (k - 1) - 1
    if ceil_mode:
        num += stride - 1
    out = num // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def max_pool2d(x, kernel, stride=None, padding=(0, 0), dilation=(1, 1),
               ceil_mode=False):
    """(values, flat H*W indices) of max_pool2d over x (..., H, W) with
    torch's CPU rule: the max starts at -inf with the index of the first
    in-bounds element, and a later element wins when greater or NaN."""
    stride = stride or kernel
    x = np.asarray(x, dtype=np.float64)
    h, w = x.shape[-2:]
    planes = x.reshape(-1, h, w)
    oh = pool_out_size(h, kernel[0], padding[0], stride[0], dilation[0],
                       ceil_mode)
    ow = pool_out_size(w, kernel[1], padding[1], stride[1], dilation[1],
                       ceil_mode)
    vals = np.empty((planes.shape[0], oh, ow))
    idx = np.empty((planes.shape[0], oh, ow), dtype=np.int64)
    for i in range(oh):
        hs = [i * stride[0] - padding[0] + k * dilation[0]
              for k in range(kernel[0])]
        hs = [r for r in hs if 0 <= r < h]
        for j in range(ow):
            ws = [j * stride[1] - padding[1] + k * dilation[1]
                  for k in range(kernel[1])]
            ws = [c for c in ws if 0 <= c < w]
            best = np.full(planes.shape[0], -np.inf)
            at = np.full(planes.shape[0], hs[0] * w + ws[0])
            for r in hs:
                for c in ws:
                    v = planes[:, r, c]
                    upd = (v > best) | np.isnan(v)
                    best = np.where(upd, v, best)
                    at = np.where(upd, r * w + c, at)
            vals[:, i, j] = best
            idx[:, i, j] = at
    shape = x.shape[:-2] + (oh, ow)
    return vals.reshape(shape), idx.reshape(shape)


def max_pool2d_backward(grad, idx, input_shape):
    """The gradients summed at their flat indices in each input plane."""
    h, w = input_shape[-2:]
    g = np.asarray(grad, dtype=np.float64).reshape(-1, grad.shape[-2] *
                                                   grad.shape[-1])
    ix = np.asarray(idx).reshape(g.shape)
    out = np.zeros((g.shape[0], h * w))
    for p in range(g.shape[0]):
        np.add.at(out[p], ix[p], g[p])
    return out.reshape(input_shape)


def log_softmax(x, dim):
    """Max-subtracted log-sum-exp; a NaN anywhere in a slice makes it NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(x, axis=dim, keepdims=True)
        s = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))
        return x - m - s


def softmax(x, dim):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.exp(log_softmax(x, dim))


def softmax_backward(grad, y, dim):
    """y * (grad - sum(grad * y)) over dim."""
    return y * (grad - np.sum(grad * y, axis=dim, keepdims=True))


def log_softmax_backward(grad, y, dim):
    """grad - exp(y) * sum(grad) over dim."""
    return grad - np.exp(y) * np.sum(grad, axis=dim, keepdims=True)


def _class_rows(x, target, weight, ignore_index):
    x = np.asarray(x, dtype=np.float64)
    x2 = x.reshape(-1, x.shape[-1])
    t = np.asarray(target, dtype=np.int64).reshape(-1)
    w = np.ones(x2.shape[1]) if weight is None else \
        np.asarray(weight, dtype=np.float64)
    keep = t != ignore_index
    tc = np.where(keep, t, 0)
    wt = np.where(keep, w[tc] if len(w) else 0.0, 0.0)
    return x2, tc, w, keep, wt


def _reduce_rows(rows, wt, reduction, batched):
    if reduction == "none":
        return rows if batched else rows[0]
    if reduction == "sum":
        return np.sum(rows)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(rows) / np.sum(wt)


def nll_loss(logp, target, weight=None, reduction="mean",
             ignore_index=-100):
    """(loss, total_weight) as torch's nll_loss_forward: total_weight is the
    sum of the kept targets' weights (0 for reduction 'none')."""
    x2, tc, w, keep, wt = _class_rows(logp, target, weight, ignore_index)
    picked = x2[np.arange(len(tc)), tc] if x2.shape[1] else \
        np.zeros(len(tc))
    rows = np.where(keep, -wt * picked, 0.0)
    total = 0.0 if reduction == "none" else np.sum(wt)
    return _reduce_rows(rows, wt, reduction, np.ndim(logp) == 2), total


def cross_entropy(logits, target, weight=None, reduction="mean",
                  ignore_index=-100, label_smoothing=0.0):
    """torch's cross_entropy with class indices: (1 - ls) * nll + ls / C *
    the weighted sum of -log_softmax, 'mean' divided by the kept targets'
    weights for both terms."""
    x2, tc, w, keep, wt = _class_rows(logits, target, weight, ignore_index)
    lp = log_softmax(x2, 1)
    c = x2.shape[1]
    picked = lp[np.arange(len(tc)), tc] if c else np.zeros(len(tc))
    nll = -wt * picked
    smooth = -np.sum(lp * w[None, :], axis=1) if c else np.zeros(len(tc))
    ls = label_smoothing
    rows = np.where(keep, (1 - ls) * nll + (ls / c if c else 0.0) * smooth,
                    0.0)
    return _reduce_rows(rows, wt, reduction, np.ndim(logits) == 2)


def mse_loss(x, t, reduction="mean"):
    d = (np.asarray(x, dtype=np.float64) - t) ** 2
    if reduction == "none":
        return d
    with np.errstate(invalid="ignore"):
        return np.sum(d) if reduction == "sum" else np.mean(d)


def mse_loss_backward(grad, x, t, reduction="mean"):
    """(2 / n for 'mean') * (x - t) * grad."""
    norm = 2.0 / np.size(x) if reduction == "mean" else 2.0
    return norm * (np.asarray(x, dtype=np.float64) - t) * grad


def sgd_step(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
             nesterov=False, maximize=False):
    """One step of torch.optim.SGD (_single_tensor_sgd) in float64; buf is
    None on the first step.  Returns (param, buf)."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    if momentum != 0:
        buf = d.copy() if buf is None else \
            momentum * buf + (1 - dampening) * d
        d = d + momentum * buf if nesterov else buf
    return p - lr * d, buf


def adam_step(p, g, m, v, vmax, step, lr, beta1=0.9, beta2=0.999, eps=1e-8,
              weight_decay=0.0, amsgrad=False, maximize=False,
              decoupled=False):
    """One step of torch.optim.Adam / AdamW (_single_tensor_adam) in
    float64, step 1-based.  Returns (param, m, v, vmax)."""
    d = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            d = d + weight_decay * p
    m = m + (1 - beta1) * (d - m)
    v = v * beta2 + (1 - beta2) * d * d
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    if amsgrad:
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax) / np.sqrt(bc2) + eps
    else:
        denom = np.sqrt(v) / np.sqrt(bc2) + eps
    return p - (lr / bc1) * m / denom, m, v, vmax


def cross_entropy_backward(grad, logp, target, weight=None, reduction="mean",
                           ignore_index=-100, label_smoothing=0.0):
    """The gradient of cross_entropy with respect to the logits, from the
    forward's log-probabilities logp (N, C) or (C,): for each kept row,
    s * (exp(logp) * A - a_k) with a_k = (1 - ls) w_t [k == t] + ls / C w_k,
    A = sum_k a_k, and s = grad's row (none), grad (sum) or grad divided by
    the kept targets' weights (mean)."""
    x2, tc, w, keep, wt = _class_rows(logp, target, weight, ignore_index)
    n, c = x2.shape
    ls = label_smoothing
    a = (ls / c) * np.broadcast_to(w, (n, c)).copy()
    a[np.arange(n), tc] += (1 - ls) * wt
    g = np.broadcast_to(np.asarray(grad, dtype=np.float64).reshape(-1),
                        (n,)) if reduction == "none" else \
        np.full(n, float(np.asarray(grad)))
    with np.errstate(divide="ignore", invalid="ignore"):
        if reduction == "mean":
            g = g / np.sum(wt)
        out = g[:, None] * (np.exp(x2) * a.sum(axis=1, keepdims=True) - a)
    out[~keep] = 0.0
    return out.reshape(np.shape(logp))


def nll_loss_backward(grad, logp, target, weight=None, reduction="mean",
                      ignore_index=-100):
    """0 except -s * w_t at each kept row's target (s as above)."""
    x2, tc, w, keep, wt = _class_rows(logp, target, weight, ignore_index)
    n = x2.shape[0]
    g = np.asarray(grad, dtype=np.float64).reshape(-1) \
        if reduction == "none" else np.full(n, float(np.asarray(grad)))
    with np.errstate(divide="ignore", invalid="ignore"):
        if reduction == "mean":
            g = g / np.sum(wt)
        out = np.zeros_like(x2)
        out[np.arange(n), tc] = np.where(keep, -g * wt, 0.0)
    return out.reshape(np.shape(logp))


# ----------------------------------------------------------------------------
# normalisation layers: batch norm over (N, *, C-th dim 1), layer norm over
# trailing dims


def _bn_dims(x):
    return (0,) + tuple(range(2, x.ndim))


def _bn_bcast(v, x):
    return np.asarray(v, dtype=np.float64).reshape(
        (1, x.shape[1]) + (1,) * (x.ndim - 2))


def batch_norm(x, w, b, rm, rv, training, momentum, eps):
    """(y, new_rm, new_rv, mean, invstd): y normalised by the batch's mean
    and biased variance (training) or the running ones; the running
    statistics move to the batch's mean and unbiased variance."""
    dims = _bn_dims(x)
    count = x.size // x.shape[1]
    if training:
        mean = x.mean(axis=dims)
        var = x.var(axis=dims)
        if rm is not None:
            rm = (1 - momentum) * rm + momentum * mean
            rv = (1 - momentum) * rv + momentum * var * count / (count - 1)
    else:
        mean, var = rm, rv
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x - _bn_bcast(mean, x)) * _bn_bcast(invstd, x)
    if w is not None:
        y = y * _bn_bcast(w, x)
    if b is not None:
        y = y + _bn_bcast(b, x)
    return y, rm, rv, mean, invstd


def batch_norm_backward(g, x, w, mean, invstd, training):
    """(grad_x, grad_w, grad_b) of batch_norm with the statistics used."""
    dims = _bn_dims(x)
    xhat = (x - _bn_bcast(mean, x)) * _bn_bcast(invstd, x)
    gw = (g * xhat).sum(axis=dims)
    gb = g.sum(axis=dims)
    scale = _bn_bcast(invstd, x) * (1.0 if w is None else _bn_bcast(w, x))
    if not training:
        return g * scale, gw, gb
    gx = scale * (g - g.mean(axis=dims, keepdims=True)
                  - xhat * (g * xhat).mean(axis=dims, keepdims=True))
    return gx, gw, gb


def layer_norm(x, nd, w=None, b=None, eps=1e-5):
    """(y, mean, rstd) over the last nd dims; mean and rstd per row."""
    dims = tuple(range(x.ndim - nd, x.ndim))
    mean = x.mean(axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=dims, keepdims=True) + eps)
    y = (x - mean) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mean.reshape(-1), rstd.reshape(-1)


def layer_norm_backward(g, x, nd, w=None, eps=1e-5):
    """(grad_x, grad_w, grad_b) of layer_norm."""
    dims = tuple(range(x.ndim - nd, x.ndim))
    lead = tuple(range(x.ndim - nd))
    mean = x.mean(axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=dims, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    gh = g if w is None else g * w
    gx = rstd * (gh - gh.mean(axis=dims, keepdims=True)
                 - xhat * (gh * xhat).mean(axis=dims, keepdims=True))
    return gx, (g * xhat).sum(axis=lead), g.sum(axis=lead)


def group_norm(x, groups, w=None, b=None, eps=1e-5):
    """(y, mean, rstd) of x (N, C, *) normalised per (sample, group of C /
    groups channels), then scaled and shifted per channel; mean and rstd
    (N, groups)."""
    n, c = x.shape[:2]
    r = x.reshape(n, groups, -1)
    mean = r.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(r.var(-1, keepdims=True) + eps)
    y = ((r - mean) * rstd).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y, mean.reshape(n, groups), rstd.reshape(n, groups)


def group_norm_backward(g, x, groups, w=None, eps=1e-5):
    """(grad_x, grad_w, grad_b) of group_norm: layer norm's formula on each
    (sample, group), the weight's share taken per channel."""
    n, c = x.shape[:2]
    xhat, _, rstd = group_norm(x, groups, eps=eps)
    gh = g if w is None else g * w.reshape((1, c) + (1,) * (x.ndim - 2))
    r, rh = gh.reshape(n, groups, -1), xhat.reshape(n, groups, -1)
    gx = rstd[..., None] * (r - r.mean(-1, keepdims=True)
                            - rh * (r * rh).mean(-1, keepdims=True))
    dims = (0,) + tuple(range(2, x.ndim))
    return gx.reshape(x.shape), (g * xhat).sum(dims), g.sum(dims)


# ----------------------------------------------------------------------------
# AMP: the fused unscale-and-check, the scale update, gradient norms

# smallest normal magnitude per float dtype (subnormal below it)
MIN_NORMAL = {"float32": 2.0 ** -126, "float16": 2.0 ** -14,
              "bfloat16": 2.0 ** -126}


def amp_unscale(x, dtype, inv_scale):
    """One gradient of _amp_foreach_non_finite_check_and_unscale_: values x
    (exact in dtype) -> (new values, found, (inf, nan, zero, subnormal)).
    The test is on the input; inv_scale == 1 leaves x as it is; otherwise
    x * inv_scale (exact in float64) is rounded to float32, as the kernel's
    float32 multiply does, then to dtype.  zero/subnormal count the output
    in dtype."""
    x = np.asarray(x, dtype=np.float64)
    inf = int(np.isinf(x).sum())
    nan = int(np.isnan(x).sum())
    if inv_scale == 1.0:
        out = x
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            out = round_to(round_to(x * float(np.float32(inv_scale)),
                                    "float32"), dtype)
    a = np.abs(out)
    zero = int((a == 0).sum())
    sub = int(((a > 0) & (a < MIN_NORMAL[dtype])).sum())
    return out, inf + nan > 0, (inf, nan, zero, sub)


def amp_update_scale(scale, tracker, found_inf, growth_factor,
                     backoff_factor, growth_interval):
    """_amp_update_scale_ on floats -> (scale, tracker): backoff on any
    nonzero found_inf (NaN included), growth when the clean-step count
    reaches growth_interval exactly, unless the grown float32 scale is not
    finite; float32 rounding of double products."""
    with np.errstate(over="ignore", invalid="ignore"):
        if found_inf != 0 or found_inf != found_inf:
            return float(np.float32(float(scale) * backoff_factor)), 0
        t = tracker + 1
        if t == growth_interval:
            grown = float(np.float32(float(scale) * growth_factor))
            return (grown if np.isfinite(grown) else scale), 0
        return scale, t


def vector_norm(x, p):
    """torch.linalg.vector_norm in float64: inf/-inf max/min |x|, 0 the
    count of nonzeros, else sum(|x|^p)^(1/p); NaN propagates."""
    a = np.abs(np.asarray(x, dtype=np.float64)).reshape(-1)
    if np.isnan(a).any():
        return np.nan
    if p == np.inf:
        return float(a.max()) if a.size else 0.0
    if p == -np.inf:
        return float(a.min())
    if p == 0:
        return float((a != 0).sum())
    with np.errstate(over="ignore", divide="ignore"):
        return float(np.sum(a ** p) ** (1.0 / p))


def total_norm(values, dtypes, p):
    """clip_grad_norm_'s total norm: the norm of the per-tensor norms, each
    rounded to its tensor's dtype, rounded to the promoted dtype."""
    norms = [round_to(vector_norm(v, p), dt) for v, dt in zip(values, dtypes)]
    out = dtypes[0]
    for dt in dtypes[1:]:
        out = promote(out, dt)
    return round_to(vector_norm(np.array(norms, dtype=np.float64), p), out)


def clip_coef(total, dtype, max_norm):
    """clip_grad_norm_'s coefficient as PyTorch computes it on a 0-d tensor
    of dtype: clamp(max_norm * reciprocal(total + 1e-6), max=1), each op in
    float32 arithmetic, rounded to dtype."""
    def op(x):
        return float(round_to(round_to(x, "float32"), dtype))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = op(float(total) + float(np.float32(1e-6)))
        r = op(np.float64(1.0) / x)
        c = op(r * float(np.float32(max_norm)))
    return c if c != c else min(c, 1.0)
