"""The expected output of the ported tutorial programs tests/golden/port_*.ml (issue 29), computed
with the tutorials' own code in PyTorch, NumPy or plain Python, never with tapeml. Each function
returns the lines its port prints, written in tapeml's print format (numbers as %.7g, matrices as
[a, b; c, d]); values are rounded as the port rounds them, so no BLAS noise shows.

    python tests/reference/make_port_reference.py          # rewrites tests/golden/port_*.out
    python tests/reference/make_port_reference.py --check  # says which .out differ

Needs numpy and torch (torch==2.13.0, the tests' reference version; never a dependency)."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")


# ---- tapeml's print format ------------------------------------------------------------------
def num(v) -> str:
    v = float(v)
    if v == 0:
        return "0"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        return "nan"
    s = "%.7g" % v
    if "e" in s:
        m, e = s.split("e")
        s = f"{m}e{int(e)}"
    return s


def show(x) -> str:
    if isinstance(x, torch.Tensor):
        x = x.detach().numpy()
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, str):
        return x
    if isinstance(x, tuple):
        return "(" + ", ".join(show(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in x.items()) + "}"
    a = np.asarray(x)
    if a.ndim == 0:
        return show(bool(a)) if a.dtype == np.bool_ else num(a)
    item = (lambda v: show(bool(v))) if a.dtype == np.bool_ else num
    if a.ndim == 1:
        return "[" + ", ".join(item(v) for v in a) + "]"
    if a.ndim == 2:
        if a.shape[1] == 1 and a.shape[0] > 1:
            return "[" + "; ".join(item(v) for v in a[:, 0]) + "]"
        rows = "; ".join(", ".join(item(v) for v in r) for r in a)
        return "[" + rows + (";" if a.shape[0] == 1 else "") + "]"
    raise ValueError("3-d values are printed by slices in the ports")


def line(*xs) -> str:
    return " ".join(show(x) for x in xs)


def r(x, d):
    """tapeml's round(x, d): NumPy's round half to even."""
    if isinstance(x, torch.Tensor):
        x = x.detach().numpy()
    return np.round(np.asarray(x, dtype=np.float64), d)


def sin_grid(n, *shape, scale=1.0):
    return torch.sin(torch.arange(n, dtype=torch.float64).reshape(*shape) / scale)


def cos_grid(n, *shape, scale=1.0):
    return torch.cos(torch.arange(n, dtype=torch.float64).reshape(*shape) / scale)


# ---- nanoGPT -------------------------------------------------------------------------------
def nanogpt_causal_attention():
    T, C, nh = 4, 6, 2
    hs = C // nh
    x = (sin_grid(T * C, T, C) / 2).unsqueeze(0)
    c_attn = torch.nn.Linear(C, 3 * C)
    c_proj = torch.nn.Linear(C, C, bias=False)
    with torch.no_grad():
        c_attn.weight.copy_((cos_grid(C * 3 * C, C, 3 * C) / 4).T)
        c_attn.bias.copy_(torch.linspace(-0.1, 0.1, 3 * C))
        c_proj.weight.copy_((torch.sin(torch.arange(C * C, dtype=torch.float64).reshape(C, C) / 3) / 4).T)
    bias = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
    B = 1
    q, k, v = c_attn(x).split(C, dim=2)
    k = k.view(B, T, nh, hs).transpose(1, 2)
    q = q.view(B, T, nh, hs).transpose(1, 2)
    v = v.view(B, T, nh, hs).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float('-inf'))
    att = F.softmax(att, dim=-1)
    y = att @ v
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    y = c_proj(y)
    return [line(r(y[0], 4)), "true"]


def nanogpt_mlp_block():
    T, C = 3, 4
    x = cos_grid(T * C, T, C)
    ln_w = torch.tensor([1, 0.5, 2, 1.5])
    c_fc = torch.nn.Linear(C, 4 * C)
    c_proj = torch.nn.Linear(4 * C, C, bias=False)
    with torch.no_grad():
        c_fc.weight.copy_((sin_grid(C * 4 * C, C, 4 * C) / 2).T)
        c_fc.bias.copy_(torch.linspace(-0.2, 0.2, 4 * C))
        c_proj.weight.copy_((cos_grid(4 * C * C, 4 * C, C) / 3).T)
    ln = F.layer_norm(x, ln_w.shape, ln_w, None, 1e-5)
    y = x + c_proj(torch.nn.GELU()(c_fc(ln)))
    return [line(r(y, 4)), line(r(F.gelu(torch.tensor([-1.0, 0, 1, 3])), 6))]


def nanogpt_generate():
    V, block_size = 5, 3
    W = sin_grid(V * V, V, V)
    pos = cos_grid(block_size * V, block_size, V) / 2
    idx = torch.tensor([[1]])
    for _ in range(8):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits = W[idx_cond[0]] + pos[:idx_cond.size(1)]
        logits = logits[-1, :]
        idx_next = torch.argmax(logits).view(1, 1)        # temperature 0: the most likely
        idx = torch.cat((idx, idx_next), dim=1)
    z = torch.tensor([[0.3, 2.5, -1, 1.7, 0.9]])
    v, _ = torch.topk(z, 3)
    z[z < v[:, [-1]]] = -float('Inf')
    return [line(idx[0]), line(z[0]), line(z[0])]


def nanogpt_loss_ignore_index():
    B, T, V = 2, 3, 4
    logits = (sin_grid(B * T * V, B, T, V) * 2).view(-1, V).requires_grad_()
    targets = torch.tensor([[0, 3, -1], [2, -1, -1]])
    loss = F.cross_entropy(logits, targets.view(-1), ignore_index=-1)
    loss.backward()
    return [line(r(loss, 6)), line(r(logits.grad, 4))]


# ---- makemore ------------------------------------------------------------------------------
def makemore_bigram_counts():
    words = ["emma", "olivia", "ava", "isabella"]
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    V = len(chars) + 1
    N = np.zeros((V, V))
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            N[stoi[ch1], stoi[ch2]] += 1
    P = (N + 1) / (N + 1).sum(1, keepdims=True)
    log_likelihood, n = 0.0, 0
    for w in words:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            log_likelihood += np.log(P[stoi[ch1], stoi[ch2]])
            n += 1
    return [line(N[0]), line(N.sum()), line(r(P[0], 4)), line(n, r(-log_likelihood / n, 6))]


def makemore_mlp_forward():
    block_size = 3
    X, Y = [], []
    context = [0] * block_size
    for ix in [5, 13, 13, 1, 0]:
        X.append(context)
        Y.append(ix)
        context = context[1:] + [ix]
    X, Y = torch.tensor(X), torch.tensor(Y)
    C = sin_grid(27 * 2, 27, 2)
    W1 = cos_grid(60, 6, 10) / 2
    b1 = torch.linspace(-0.5, 0.5, 10)
    W2 = sin_grid(270, 10, 27, scale=7)
    b2 = torch.zeros(27)
    emb = C[X]
    h = torch.tanh(emb.view(-1, 6) @ W1 + b1)
    logits = h @ W2 + b2
    return [line(X), line(tuple(emb.shape)), line(r(h[0], 4)), line(r(F.cross_entropy(logits, Y), 6))]


def makemore_manual_backprop():
    n = 4
    Xb = torch.tensor([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 0]])
    Yb = torch.tensor([2, 3, 0, 1])
    C = sin_grid(10, 5, 2).requires_grad_()
    W1 = (cos_grid(24, 6, 4) / 2).requires_grad_()
    b1 = torch.tensor([0.1, -0.1, 0.2, 0]).requires_grad_()
    W2 = sin_grid(20, 4, 5, scale=3).requires_grad_()
    b2 = torch.tensor([0, 0.1, 0, -0.1, 0]).requires_grad_()
    emb = C[Xb]
    h = torch.tanh(emb.view(n, -1) @ W1 + b1)
    loss = F.cross_entropy(h @ W2 + b2, Yb)
    loss.backward()
    return [line(r(loss, 6)), line(r(W2.grad[0], 4)), line(r(b1.grad, 4)), line(r(C.grad, 4)),
            "true true true true true"]


def makemore_batchnorm():
    n = 5
    hprebn = sin_grid(n * 3, n, 3) * 3 + torch.tensor([1, -1, 0.5])
    bngain = torch.tensor([1, 0.5, 2])
    bnbias = torch.tensor([0, 0.1, -0.1])
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bnvar = 1 / (n - 1) * (bndiff ** 2).sum(0, keepdim=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    hpreact = bngain * bndiff * bnvar_inv + bnbias
    running_mean = 0.999 * torch.zeros(1, 3) + 0.001 * bnmeani
    running_var = 0.999 * torch.ones(1, 3) + 0.001 * bnvar
    bn = torch.nn.BatchNorm1d(3, momentum=0.001)
    with torch.no_grad():
        bn.weight.copy_(bngain)
        bn.bias.copy_(bnbias)
    out = bn(hprebn)
    return [line(r(hpreact[0:2], 4)), line(r(running_mean, 6), r(running_var, 6)), line(r(out[0:2], 4)),
            line(r(bn.running_mean, 6), r(bn.running_var, 6))]


# ---- minbpe (its code, with bytes) ----------------------------------------------------------
def get_stats(ids, counts=None):
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge(ids, pair, idx):
    newids, i = [], 0
    while i < len(ids):
        if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
            newids.append(idx)
            i += 2
        else:
            newids.append(ids[i])
            i += 1
    return newids


def minbpe_encode():
    ids = list("the cat sat on the mat with the hat".encode("utf-8"))
    merges = {}
    for i in range(3):
        stats = get_stats(ids)
        pair = max(stats, key=stats.get)
        merges[pair] = 256 + i
        ids = merge(ids, pair, 256 + i)

    def encode(text):
        ids = list(text.encode("utf-8"))
        while len(ids) >= 2:
            stats = get_stats(ids)
            pair = min(stats, key=lambda p: merges.get(p, float("inf")))
            if pair not in merges:
                break
            ids = merge(ids, pair, merges[pair])
        return ids
    return [line(merges), line(np.array(encode("that hat"))),
            line(len(encode("the theme")), len("the theme".encode("utf-8")))]


def minbpe_decode():
    merges = {(104, 101): 256, (256, 32): 257, (116, 257): 258, (97, 116): 259}
    vocab = {idx: bytes([idx]) for idx in range(32, 127)}
    for (p0, p1), idx in merges.items():
        vocab[idx] = vocab[p0] + vocab[p1]
    text = b"".join(vocab[idx] for idx in [258, 99, 259, 32, 115, 259]).decode("utf-8")
    return [f"{vocab[257].decode()} {vocab[258].decode()} {len(vocab)}", text,
            "|".join(vocab[i].decode() for i in [256, 259])]


# ---- the Annotated Transformer -------------------------------------------------------------
def subsequent_mask(size):
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8) == 0


def annotated_masks():
    pad = 2
    tgt = torch.tensor([[0, 5, 7, 4, 2], [0, 6, 2, 2, 2]])
    tgt_mask = (tgt != pad).unsqueeze(-2)
    tgt_mask = tgt_mask & subsequent_mask(tgt.size(-1)).type_as(tgt_mask.data)
    scores = sin_grid(50, 2, 5, 5) * 3
    p_attn = scores.masked_fill(tgt_mask == 0, -1e9).softmax(dim=-1)
    return [line(tuple(tgt_mask.shape)), line(tgt_mask[1]), line(tgt_mask.sum(2)), line(r(p_attn[1], 4))]


def annotated_label_smoothing():
    size, padding_idx, smoothing = 5, 0, 0.4
    x = torch.tensor([[0.05, 0.2, 0.6, 0.1, 0.05]] * 5)
    x[3] = torch.tensor([0.1, 0.1, 0.1, 0.6, 0.1])
    x = x.log()
    target = torch.tensor([2, 1, 0, 3, 3])
    true_dist = x.data.clone()
    true_dist.fill_(smoothing / (size - 2))
    true_dist.scatter_(1, target.data.unsqueeze(1), 1.0 - smoothing)
    true_dist[:, padding_idx] = 0
    mask = torch.nonzero(target.data == padding_idx)
    if mask.dim() > 0:
        true_dist.index_fill_(0, mask.squeeze(), 0.0)
    loss = torch.nn.KLDivLoss(reduction="sum")(x, true_dist)
    return [line(r(true_dist, 4)), line(r(loss, 6))]


def annotated_positional_encoding():
    max_len, d_model = 6, 8
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    pe = pe.unsqueeze(0)
    x = torch.zeros(2, max_len, d_model) + 0.5
    y = x + pe[:, : x.size(1)]
    return [line(r(pe[0, [1, -1]], 4)), "true", line(r(y.sum(2)[1], 4))]


def annotated_attention():
    B, T, h, d_model = 2, 3, 2, 4
    d_k = d_model // h
    x = sin_grid(B * T * d_model, B, T, d_model)
    Wq = cos_grid(16, 4, 4) / 2
    Wk = sin_grid(16, 4, 4, scale=2)
    Wv = cos_grid(16, 4, 4, scale=3)
    src = torch.tensor([[3, 4, 0], [5, 0, 0]])
    mask = (src != 0).unsqueeze(-2).unsqueeze(1)
    query, key, value = [(x @ W).view(B, -1, h, d_k).transpose(1, 2) for W in (Wq, Wk, Wv)]
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    out = torch.matmul(p_attn, value)
    return [line(tuple(out.shape)), line(r(p_attn[1, 0], 4)),
            line(r(out.transpose(1, 2).contiguous().view(B, -1, h * d_k)[0], 4)), "true"]


# ---- d2l.ai --------------------------------------------------------------------------------
def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=-1)


def d2l_masked_softmax():
    X = cos_grid(16, 2, 2, 4) + 1
    a = masked_softmax(X.clone(), torch.tensor([2, 3]))
    b = masked_softmax(X.clone(), torch.tensor([[1, 3], [2, 4]]))
    return [line(r(a, 4)[0]), line(r(b[1], 4))]


def d2l_addnorm_ffn():
    X = sin_grid(24, 2, 3, 4)
    dense1, dense2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)
    with torch.no_grad():
        dense1.weight.copy_((cos_grid(32, 4, 8) / 2).T)
        dense1.bias.copy_(torch.linspace(-0.3, 0.3, 8))
        dense2.weight.copy_(sin_grid(32, 8, 4, scale=5).T)
        dense2.bias.copy_(torch.tensor([0.1, 0, -0.1, 0.2]))
    ffn = dense2(torch.relu(dense1(X)))
    ln = torch.nn.LayerNorm(4)
    Y = ln(torch.nn.Dropout(0.5).eval()(ffn) + X)
    return [line(tuple(Y.shape)), line(r(Y[1], 4)), line(r(Y.mean(-1), 6))]


# ---- NumPy's and PyTorch's docs -------------------------------------------------------------
def numpy_broadcasting():
    a = np.array([0.0, 10.0, 20.0, 30.0])
    b = np.array([1.0, 2.0, 3.0])
    observation = np.array([111.0, 188.0])
    codes = np.array([[102.0, 203.0], [132.0, 193.0], [45.0, 155.0], [57.0, 173.0]])
    diff = codes - observation
    dist = np.sqrt(np.sum(diff ** 2, axis=-1))
    x = np.arange(4).reshape(4, 1)
    y = np.ones(5)
    z = np.ones((3, 4))
    return [line(a[:, np.newaxis] + b), line(r(dist, 4), np.argmin(dist)),
            line((x + y).shape, (x * y).shape), line((x.T + z).shape, (x.T + z).sum(0))]


def numpy_lstsq():
    x = np.array([0, 1, 2, 3])
    y = np.array([-1, 0.2, 0.9, 2.1])
    A = np.vstack([x, np.ones(len(x))]).T
    (m, c), res, _, _ = np.linalg.lstsq(A, y, rcond=None)
    return [line(r(m, 6), r(c, 6)), line(r(res[0], 6))]


def numpy_einsum():
    a = np.arange(25).reshape(5, 5)
    b = np.arange(5)
    c = np.arange(6).reshape(2, 3)
    p = np.arange(12).reshape(2, 2, 3)
    q = np.arange(18).reshape(2, 3, 3)
    return [line(np.einsum("ii", a), np.einsum("ii->i", a)), line(np.einsum("ji", c)),
            line(np.einsum("ij,j", a, b), np.einsum("i,i", b, b)), line(np.einsum("i,j", np.arange(2), b)),
            line(np.einsum("bij,bjk->bik", p, q)[1]),
            line(np.einsum("ij,jk,kl->il", c, np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)))]


def pytorch_autograd():
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a ** 3 - b ** 2
    Q.backward(gradient=torch.tensor([1., 1.]))
    x = torch.ones(5)
    y = torch.zeros(3)
    w = sin_grid(15, 5, 3).requires_grad_()
    bias = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
    z = torch.matmul(x, w) + bias
    loss = F.binary_cross_entropy_with_logits(z, y)
    loss.backward()
    return [line(a.grad, b.grad), line(r(loss, 6)), line(r(w.grad, 4)), line(r(bias.grad, 4))]


def pytorch_polynomial_fit():
    x = np.linspace(-math.pi, math.pi, 2000)
    y = np.sin(x)
    a, b, c, d = 0.1, 0.2, -0.1, 0.05
    learning_rate = 1e-6
    out = []
    for t in range(2000):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = np.square(y_pred - y).sum()
        if t % 500 == 499:
            out.append(line(t, r(loss, 4)))
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    out.append(f"y = {num(r(a, 4))} + {num(r(b, 4))} x + {num(r(c, 4))} x^2 + {num(r(d, 4))} x^3")
    return out


def pytorch_gather_scatter():
    t = torch.tensor([[1, 2], [3, 4]])
    src = torch.ones((2, 5))
    index = torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])
    a = np.array([[10, 30, 20], [60, 40, 50]])
    ai = np.argsort(a, axis=1)
    return [line(torch.gather(t, 1, torch.tensor([[0, 0], [1, 0]]))),
            line(torch.zeros(3, 5, dtype=src.dtype).scatter_add_(0, index, src)),
            line(ai, np.take_along_axis(a, ai, axis=1)),
            line(np.take_along_axis(a, np.expand_dims(np.argmax(a, axis=1), axis=1), axis=1))]


PORTS = {name: fn for name, fn in list(globals().items())
         if callable(fn) and fn.__module__ == __name__ and name.split("_")[0] in
         ("nanogpt", "makemore", "minbpe", "annotated", "d2l", "numpy", "pytorch")}


def main(check: bool) -> int:
    bad = 0
    for name, fn in PORTS.items():
        text = "\n".join(fn()) + "\n"
        path = os.path.join(GOLDEN, f"port_{name}.out")
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"differs: {path}")
                    bad += 1
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    print(f"{len(PORTS)} ports, {bad} differ" if check else f"wrote {len(PORTS)} .out files")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv))
