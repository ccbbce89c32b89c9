"""The floor: a post-norm transformer block's forward and backward written by hand in NumPy
(fused Q/K/V projections across heads, as an expert would write it), no interpreter, no tape."""
import numpy as np


def ln_fwd(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = xc * rstd
    return xhat * g + b, (xhat, rstd)


def ln_bwd(dy, g, cache):
    xhat, rstd = cache
    dxhat = dy * g
    d = xhat.shape[-1]
    dx = rstd * (dxhat - dxhat.sum(-1, keepdims=True) / d - xhat * (dxhat * xhat).sum(-1, keepdims=True) / d)
    lead = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(lead), dy.sum(lead)


def block_fwd_bwd(x, W, R):
    """x [T, D]; W dict with Wq, Wk, Wv [D, H*dk], Wo [H*dk, D], g1, b1n, w1, b1, w2, b2, g2, b2n.
    Returns out and the gradients of sum(out * R) for every weight. Not for x: the benchmark
    differentiates the weights only, as tapeml and PyTorch do there, and x's gradient would
    cost the floor three more matrix products."""
    T, D = x.shape
    H = W["H"]
    dk = W["Wq"].shape[1] // H
    scale = 1.0 / float(np.sqrt(dk))     # a Python float: keeps float32 inputs in float32
    q = (x @ W["Wq"]).reshape(T, H, dk).transpose(1, 0, 2)
    k = (x @ W["Wk"]).reshape(T, H, dk).transpose(1, 0, 2)
    v = (x @ W["Wv"]).reshape(T, H, dk).transpose(1, 0, 2)
    s = (q @ k.transpose(0, 2, 1)) * scale
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    o = p @ v                                           # [H, T, dk]
    ocat = o.transpose(1, 0, 2).reshape(T, H * dk)
    a = ocat @ W["Wo"]
    h1, c1 = ln_fwd(x + a, W["g1"], W["b1n"])
    z = h1 @ W["w1"] + W["b1"]
    u = np.maximum(z, 0)
    f = u @ W["w2"] + W["b2"]
    out, c2 = ln_fwd(h1 + f, W["g2"], W["b2n"])
    # backward
    G = {}
    dr2, G["g2"], G["b2n"] = ln_bwd(R, W["g2"], c2)
    G["w2"] = u.T @ dr2
    G["b2"] = dr2.sum(0)
    dz = (dr2 @ W["w2"].T) * (z > 0)
    G["w1"] = h1.T @ dz
    G["b1"] = dz.sum(0)
    dh1 = dr2 + dz @ W["w1"].T
    dr1, G["g1"], G["b1n"] = ln_bwd(dh1, W["g1"], c1)
    G["Wo"] = ocat.T @ dr1
    do = (dr1 @ W["Wo"].T).reshape(T, H, dk).transpose(1, 0, 2)
    dp = do @ v.transpose(0, 2, 1)
    dv = p.transpose(0, 2, 1) @ do
    ds = p * (dp - (do * o).sum(-1, keepdims=True)) * scale    # rowsum(dp * p) = rowsum(do * o)
    dq = ds @ k
    dkk = ds.transpose(0, 2, 1) @ q
    dq, dkk, dv = (t.transpose(1, 0, 2).reshape(T, H * dk) for t in (dq, dkk, dv))
    G["Wq"], G["Wk"], G["Wv"] = x.T @ dq, x.T @ dkk, x.T @ dv
    return out, G


def block_fwd(x, W):
    T, D = x.shape
    H = W["H"]
    dk = W["Wq"].shape[1] // H
    q = (x @ W["Wq"]).reshape(T, H, dk).transpose(1, 0, 2)
    k = (x @ W["Wk"]).reshape(T, H, dk).transpose(1, 0, 2)
    v = (x @ W["Wv"]).reshape(T, H, dk).transpose(1, 0, 2)
    s = (q @ k.transpose(0, 2, 1)) * (1.0 / float(np.sqrt(dk)))
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    a = (p @ v).transpose(1, 0, 2).reshape(T, H * dk) @ W["Wo"]
    h1, _ = ln_fwd(x + a, W["g1"], W["b1n"])
    f = np.maximum(h1 @ W["w1"] + W["b1"], 0) @ W["w2"] + W["b2"]
    return ln_fwd(h1 + f, W["g2"], W["b2n"])[0]


def make_weights(D, H, hidden, rng, dtype=np.float64):
    dk = D // H
    s = 1.0 / np.sqrt(D)
    W = {"H": H,
         "Wq": rng.standard_normal((D, H * dk)) * s, "Wk": rng.standard_normal((D, H * dk)) * s,
         "Wv": rng.standard_normal((D, H * dk)) * s, "Wo": rng.standard_normal((H * dk, D)) * s,
         "g1": 1 + 0.1 * rng.standard_normal(D), "b1n": 0.1 * rng.standard_normal(D),
         "w1": rng.standard_normal((D, hidden)) * s, "b1": 0.1 * rng.standard_normal(hidden),
         "w2": rng.standard_normal((hidden, D)) / np.sqrt(hidden), "b2": 0.1 * rng.standard_normal(D),
         "g2": 1 + 0.1 * rng.standard_normal(D), "b2n": 0.1 * rng.standard_normal(D)}
    return {k: (v.astype(dtype) if isinstance(v, np.ndarray) else v) for k, v in W.items()}


def to_record_fields(W):
    """The same weights in tapeml's record layout (a tuple of head records)."""
    H = W["H"]
    dk = W["Wq"].shape[1] // H
    heads = []
    for h in range(H):
        sl = slice(h * dk, (h + 1) * dk)
        heads.append({"wq": W["Wq"][:, sl], "wk": W["Wk"][:, sl], "wv": W["Wv"][:, sl], "wo": W["Wo"][sl, :]})
    return {"heads": heads, "ln1_gamma": W["g1"], "ln1_beta": W["b1n"], "w1": W["w1"], "b1": W["b1"],
            "w2": W["w2"], "b2": W["b2"], "ln2_gamma": W["g2"], "ln2_beta": W["b2n"]}
