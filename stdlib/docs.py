"""Documentation of the stdlib functions (stdlib/*.ml), in the shape of the builtin registry.

STDLIB_DOCS maps a function name to a dict with the keys the docs builder reads for builtins:
file, category, signature, summary, what, how, errors, examples (tapeml code, executed by the
docs build like a builtin's examples). The functions themselves are plain tapeml in the .ml
files next to this module; a test checks that every documented name is defined there and
every public function defined there is documented.
"""
from __future__ import annotations


def _doc(file, category, signature, summary, what="", how="", errors=(), examples=()):
    return dict(file=file, category=category, signature=signature, summary=summary, what=what,
                how=how, errors=list(errors), examples=list(examples))


_OPT = "stdlib/optim.ml"
_SCH = "stdlib/schedule.ml"
_TXT = "stdlib/text.ml"
_GEN = "stdlib/generate.ml"
ML = "Statistics & ML"

_P = "p = {w = [1.0, 2.0], b = 0.5}\ng = {w = [0.1, -0.2], b = 1.0}\n"

STDLIB_DOCS = {
    "zeros_like": _doc(_OPT, ML, "zeros_like(tree)", "A tree shaped like tree with every leaf zero.",
                       how="tree_map(fn(p) -> 0 * p, tree).",
                       examples=["zeros_like({w = [1, 2], b = 3})"]),
    "sgd_init": _doc(_OPT, ML, "sgd_init(params)", "The state of sgd_step: {step = 0, momentum_buffer}.",
                     examples=[_P + "sgd_init(p)"]),
    "sgd_step": _doc(
        _OPT, ML,
        "sgd_step(params, grads, state, lr=0.001, momentum=0, dampening=0, weight_decay=0, nesterov=false)",
        "One step of stochastic gradient descent with momentum; returns (params, state).",
        what="Moves every parameter against its gradient. With momentum the step follows a running "
             "sum of past gradients, which smooths noisy gradients.",
        how="torch.optim.SGD: g += weight_decay * p; buf = g on the first step, later "
            "buf = momentum * buf + (1 - dampening) * g; g = buf (or g + momentum * buf with nesterov); "
            "p -= lr * g (Sutskever et al. 2013). Checked against PyTorch for 5 steps.",
        examples=[_P + "s = sgd_init(p)\np, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)\np, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)\np"]),
    "adam_init": _doc(_OPT, ML, "adam_init(params)", "The state of adam_step: {step = 0, m, v} with zero moments.",
                      examples=[_P + "adam_init(p).step"]),
    "adamw_init": _doc(_OPT, ML, "adamw_init(params)", "The state of adamw_step (the same as adam_init).",
                       examples=[_P + "adamw_init(p).m"]),
    "adam_update": _doc(_OPT, ML, "adam_update(params, grads, state, lr, betas, eps, decay=1)",
                        "The Adam update shared by adam_step and adamw_step.",
                        how="m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; "
                            "p = p * decay - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps); "
                            "decay is 1 - lr * weight_decay for AdamW, 1 for Adam.",
                        examples=[_P + "adam_update(p, g, adam_init(p), 0.1, (0.9, 0.999), 1e-8)[0]"]),
    "adam_step": _doc(
        _OPT, ML, "adam_step(params, grads, state, lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)",
        "One Adam step; returns (params, state).",
        what="Adam scales each parameter's step by running estimates of the mean and the mean square of "
             "its gradient, so every parameter moves at a similar rate whatever its gradient's scale.",
        how="Kingma & Ba 2015, Algorithm 1, with PyTorch's arithmetic (torch.optim.Adam): "
            "g += weight_decay * p (L2); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; "
            "p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). Checked against PyTorch for 5 steps. "
            "amsgrad and maximize are not supported.",
        examples=[_P + "s = adam_init(p)\np, s = adam_step(p, g, s, lr = 0.1)\nprint(p, s.step)"]),
    "adamw_step": _doc(
        _OPT, ML, "adamw_step(params, grads, state, lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)",
        "One AdamW step (Adam with decoupled weight decay); returns (params, state).",
        what="The optimizer of most transformer training: Adam, plus a weight decay that shrinks the "
             "parameters directly instead of adding to the gradient.",
        how="Loshchilov & Hutter 2019 as torch.optim.AdamW: p = p * (1 - lr * weight_decay), then the "
            "Adam update of adam_step. Checked against PyTorch for 5 steps.",
        examples=[_P + "s = adamw_init(p)\np, s = adamw_step(p, g, s, lr = 0.1, weight_decay = 0.01)\np"]),
    "grad_norm": _doc(_OPT, ML, "grad_norm(grads)", "The global L2 norm of a gradient tree.",
                      how="sqrt(sum over leaves of sum(g^2)).",
                      examples=["grad_norm({w = [3, 0], b = 4})"]),
    "clip_grad_norm": _doc(
        _OPT, ML, "clip_grad_norm(grads, max_norm)",
        "The gradient tree scaled down so that its global norm is at most max_norm.",
        what="Guards against a single huge gradient step (exploding gradients).",
        how="torch.nn.utils.clip_grad_norm_: coef = min(max_norm / (grad_norm(grads) + 1e-6), 1); every "
            "leaf times coef. Returns the clipped tree (use grad_norm for the norm itself).",
        examples=["clip_grad_norm({w = [3, 0], b = 4}, 1)"]),
    "noam_lr": _doc(
        _SCH, ML, "noam_lr(step, d_model, warmup, scale=1.0)",
        "The Transformer's warmup schedule: linear rise for warmup steps, then 1/sqrt(step) decay.",
        what="The learning rate of the original Transformer at a given optimizer step: it climbs "
             "linearly for `warmup` steps, peaks, then decays as one over the square root of the step "
             "(four times the steps, half the rate).",
        how="scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al. 2017, eq. 3); "
            "steps below 1 count as 1.",
        examples=["noam_lr(4000, 512, 4000)", "noam_lr(16000, 512, 4000) / noam_lr(4000, 512, 4000)"]),
    "cosine_lr": _doc(
        _SCH, ML, "cosine_lr(step, total, lr_max, lr_min=0, warmup=0)",
        "Linear warmup to lr_max, then a half cosine down to lr_min at step total.",
        how="step <= warmup: lr_max * step / warmup; after: lr_min + (lr_max - lr_min) (1 + cos(pi p)) / 2 "
            "with p = (step - warmup) / (total - warmup), capped at 1 (Loshchilov & Hutter 2017).",
        examples=["cosine_lr(50, 100, 1e-3)", "cosine_lr(5, 100, 1e-3, warmup = 10)"]),
    "char_vocab": _doc(_TXT, ML, "char_vocab(text)",
                       "The distinct characters of a text in code-point order, as a string (the vocabulary).",
                       how="from_char_codes(unique(char_codes(text))); a character's id is its 0-based "
                           "position in this string, so len(vocab) is the vocabulary size.",
                       examples=["char_vocab(\"hello world\")"]),
    "encode": _doc(_TXT, ML, "encode(vocab, text)", "The 0-based ids of a text's characters, as a vector.",
                   how="A lookup table from code point to position in vocab, indexed by char_codes(text).",
                   errors=["ValueError naming a character that is not in the vocabulary"],
                   examples=["v = char_vocab(\"hello world\")\nencode(v, \"low\")"]),
    "decode": _doc(_TXT, ML, "decode(vocab, ids)", "The text a vector of ids (or one id) stands for.",
                   how="from_char_codes(char_codes(vocab)[ids]); the inverse of encode.",
                   errors=["IndexError when an id is outside 0..len(vocab)-1"],
                   examples=["v = char_vocab(\"hello world\")\ndecode(v, encode(v, \"hello\"))"]),
    "top_k_filter": _doc(_GEN, ML, "top_k_filter(z, top_k)",
                         "Keep the top_k largest scores; the others become -inf.",
                         how="Removes the largest score top_k - 1 times to find the k-th largest, then "
                             "where(z >= kth, z, -inf); ties at the k-th score are all kept (as Hugging Face's "
                             "TopKLogitsWarper).",
                         examples=["top_k_filter([1, 5, 3, 4], 2)"]),
    "next_token": _doc(_GEN, ML, "next_token(z, temperature=1.0, top_k=0)",
                       "One token id from a vector of logits: greedy near temperature 0, else sampled.",
                       how="temperature <= 1e-6: argmax(z); otherwise sample(softmax(top_k_filter(z / temperature, "
                           "top_k))). Dividing by the temperature never reorders the scores; lower sharpens.",
                       examples=["next_token([1, 5, 3], 0)", "seed(0)\nnext_token([1, 5, 3], 0.8, top_k = 2)"]),
    "generate": _doc(
        _GEN, ML, "generate(logits_fn, params, ids, n_new, temperature=1.0, top_k=0, context=0)",
        "Extend a vector of token ids by n_new tokens, one prediction at a time.",
        what="Autoregressive decoding: the model scores the next token from the ids so far, one is "
             "picked (next_token) and appended, and the longer sequence goes back in.",
        how="For each new token: logits = logits_fn(params, ids) (the last row when T x V), then "
            "next_token(logits, temperature, top_k). With context > 0 only the last `context` ids are fed "
            "(a model's maximum length). No key/value cache: each step recomputes the whole window.",
        examples=["bigram = [0, 1, 0; 0, 0, 1; 1, 0, 0] * 10\n"
                  "generate(fn(p, ids) -> p[ids, :], bigram, [0], 5, temperature = 0)"]),
}
