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
                       what="A tree with the structure and shapes of tree and every number zero: the starting "
                            "value of momentum buffers and Adam's moments.",
                       how="tree_map(fn(p) -> 0 * p, tree), JAX's `tree_map(jnp.zeros_like, tree)`; a number "
                           "leaf becomes 0, a matrix leaf a zero matrix of its shape.",
                       errors=["TypeError when a leaf is not a number or matrix (the multiplication 0 * leaf fails)"],
                       examples=["zeros_like({w = [1, 2], b = 3})"]),
    "sgd_init": _doc(_OPT, ML, "sgd_init(params)", "The state of sgd_step: {step = 0, momentum_buffer}.",
                     what="The optimizer state sgd_step starts from: step 0 and a zero momentum buffer shaped "
                          "like params (used only when momentum is not 0).",
                     how="{step = 0, momentum_buffer = zeros_like(params)}, torch.optim.SGD's per-parameter "
                         "`momentum_buffer` state (PyTorch creates it on the first step; here it exists from "
                         "the start and step 0 marks it unused).",
                     errors=["TypeError when a leaf is not a number or matrix (the multiplication 0 * leaf fails)"],
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
        errors=["ValueError naming the path where grads (or the state) does not have the structure of params (from tree_map)",
                "NameError when state is not a record from sgd_init (it has no field momentum_buffer)"],
        examples=[_P + "s = sgd_init(p)\np, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)\np, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)\np"]),
    "adam_init": _doc(_OPT, ML, "adam_init(params)", "The state of adam_step: {step = 0, m, v} with zero moments.",
                      what="The optimizer state adam_step starts from: step 0 and the running first- and "
                           "second-moment estimates m and v, zero trees shaped like params.",
                      how="{step = 0, m = zeros_like(params), v = zeros_like(params)}: m_0 = v_0 = 0 as in "
                          "Kingma & Ba 2015, Algorithm 1 (torch.optim.Adam's exp_avg and exp_avg_sq).",
                      errors=["TypeError when a leaf is not a number or matrix (the multiplication 0 * leaf fails)"],
                      examples=[_P + "adam_init(p).step"]),
    "adamw_init": _doc(_OPT, ML, "adamw_init(params)", "The state of adamw_step (the same as adam_init).",
                       what="The optimizer state adamw_step starts from. AdamW keeps the same state as Adam "
                            "(step, m, v), so this is adam_init under the name that pairs with adamw_step.",
                       how="adam_init(params): torch.optim.AdamW keeps the same exp_avg / exp_avg_sq state as "
                           "torch.optim.Adam (Loshchilov & Hutter 2019, Algorithm 2: m_0 = v_0 = 0).",
                       errors=["TypeError when a leaf is not a number or matrix (the multiplication 0 * leaf fails)"],
                       examples=[_P + "adamw_init(p).m"]),
    "adam_update": _doc(_OPT, ML, "adam_update(params, grads, state, lr, betas, eps, decay=1)",
                        "The Adam update shared by adam_step and adamw_step.",
                        what="The arithmetic both Adam variants share: new moment estimates from the gradients, "
                             "then each parameter times decay, moved against its bias-corrected step. "
                             "adam_step calls it with decay = 1, adamw_step with 1 - lr * weight_decay; use those.",
                        errors=["ValueError naming the path where grads or the state's moments do not have the "
                                "structure of params (from tree_map)",
                                "IndexError when betas has fewer than 2 items",
                                "NameError when state has no field step, m or v"],
                        how="Kingma & Ba 2015, Algorithm 1, in PyTorch's order of operations: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; "
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
        errors=["ValueError naming the path where grads (or the state) does not have the structure of params (from tree_map)",
                "NameError when state is not a record from adam_init (no field step, m or v)"],
        examples=[_P + "s = adam_init(p)\np, s = adam_step(p, g, s, lr = 0.1)\nprint(p, s.step)"]),
    "adamw_step": _doc(
        _OPT, ML, "adamw_step(params, grads, state, lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)",
        "One AdamW step (Adam with decoupled weight decay); returns (params, state).",
        what="The optimizer of most transformer training: Adam, plus a weight decay that shrinks the "
             "parameters directly instead of adding to the gradient.",
        how="Loshchilov & Hutter 2019 as torch.optim.AdamW: p = p * (1 - lr * weight_decay), then the "
            "Adam update of adam_step. Checked against PyTorch for 5 steps.",
        errors=["ValueError naming the path where grads (or the state) does not have the structure of params (from tree_map)",
                "NameError when state is not a record from adamw_init (no field step, m or v)"],
        examples=[_P + "s = adamw_init(p)\np, s = adamw_step(p, g, s, lr = 0.1, weight_decay = 0.01)\np"]),
    "grad_norm": _doc(_OPT, ML, "grad_norm(grads)", "The global L2 norm of a gradient tree.",
                      what="One number for the size of a whole gradient: the Euclidean length of all elements "
                           "of all leaves taken together. Logged during training, and what clip_grad_norm limits.",
                      how="sqrt(sum over leaves of sum(g^2)), the total norm of torch.nn.utils.clip_grad_norm_ "
                          "(norm_type 2); an empty tree gives 0. When the sum of squares overflows (elements "
                          "beyond about 1e154, 1e19 in float32) or underflows, the leaves are divided by the "
                          "largest |g| first, so the norm is right wherever it is representable.",
                      errors=["TypeError when a leaf is not a number or matrix (g * g fails)"],
                      examples=["grad_norm({w = [3, 0], b = 4})", "grad_norm({w = [3e200, 0], b = 4e200})"]),
    "clip_grad_norm": _doc(
        _OPT, ML, "clip_grad_norm(grads, max_norm)",
        "The gradient tree scaled down so that its global norm is at most max_norm.",
        what="Guards against a single huge gradient step (exploding gradients).",
        how="torch.nn.utils.clip_grad_norm_: coef = min(max_norm / (grad_norm(grads) + 1e-6), 1); every "
            "leaf times coef. Returns the clipped tree (use grad_norm for the norm itself).",
        errors=["TypeError when a leaf is not a number or matrix, or max_norm is not a number"],
        examples=["clip_grad_norm({w = [3, 0], b = 4}, 1)"]),
    "noam_lr": _doc(
        _SCH, ML, "noam_lr(step, d_model, warmup, scale=1.0)",
        "The Transformer's warmup schedule: linear rise for warmup steps, then 1/sqrt(step) decay.",
        what="The learning rate of the original Transformer at a given optimizer step: it climbs "
             "linearly for `warmup` steps, peaks, then decays as one over the square root of the step "
             "(four times the steps, half the rate).",
        how="scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al. 2017, eq. 3); "
            "steps below 1 count as 1.",
        errors=["TypeError when an argument is not a number",
                "ValueError when d_model or warmup is not positive"],
        examples=["noam_lr(4000, 512, 4000)", "noam_lr(16000, 512, 4000) / noam_lr(4000, 512, 4000)"]),
    "cosine_lr": _doc(
        _SCH, ML, "cosine_lr(step, total, lr_max, lr_min=0, warmup=0)",
        "Linear warmup to lr_max, then a half cosine down to lr_min at step total.",
        what="A learning rate that climbs linearly from 0 to lr_max over `warmup` steps, then follows half a "
             "cosine wave down to lr_min at step total and stays there: large steps early, small ones to "
             "settle at the end.",
        errors=["TypeError when an argument is not a number"],
        how="step <= warmup: lr_max * step / warmup; after: lr_min + (lr_max - lr_min) (1 + cos(pi p)) / 2 "
            "with p = (step - warmup) / (total - warmup), capped at 1 (Loshchilov & Hutter 2017).",
        examples=["cosine_lr(50, 100, 1e-3)", "cosine_lr(5, 100, 1e-3, warmup = 10)"]),
    "char_vocab": _doc(_TXT, ML, "char_vocab(text)",
                       "The distinct characters of a text in code-point order, as a string (the vocabulary).",
                       what="The vocabulary of a character-level model: every distinct character of the "
                            "training text once, sorted by code point; len(vocab) is the number of ids V.",
                       errors=["TypeError when text is not a string"],
                       how="from_char_codes(unique(char_codes(text))); a character's id is its 0-based "
                           "position in this string, so len(vocab) is the vocabulary size.",
                       examples=["char_vocab(\"hello world\")"]),
    "encode": _doc(_TXT, ML, "encode(vocab, text)", "The 0-based ids of a text's characters, as a vector.",
                   what="Turns text into the token ids a character-level model reads: each character becomes "
                        "its 0-based position in vocab. An empty text gives an empty vector.",
                   how="A lookup table from code point to position in vocab, indexed by char_codes(text).",
                   errors=["ValueError naming a character that is not in the vocabulary",
                           "ValueError when vocab repeats a character (often vocab and text swapped)",
                           "TypeError when vocab or text is not a string"],
                   examples=["v = char_vocab(\"hello world\")\nencode(v, \"low\")"]),
    "decode": _doc(_TXT, ML, "decode(vocab, ids)", "The text a vector of ids (or one id) stands for.",
                   what="Turns token ids back into text, each id picking its character from vocab: "
                        "decode(v, encode(v, s)) is s.",
                   how="from_char_codes(char_codes(vocab)[ids]); the inverse of encode.",
                   errors=["IndexError when an id is outside 0..len(vocab)-1 or not a whole number"],
                   examples=["v = char_vocab(\"hello world\")\ndecode(v, encode(v, \"hello\"))"]),
    "script_arg": _doc(_TXT, ML, "script_arg(name, default)",
                       "The value of a name=value script argument, or default.",
                       what="Reads options given after the script name: `tapeml train.ml steps=30` makes "
                            "script_arg(\"steps\", \"1000\") return \"30\". The value is a string; "
                            "num(...) turns it into a number.",
                       how="Scans ARGS (the tuple of strings after the script name, filled in by the command "
                           "line; assigning ARGS in a script does not change what script_arg reads) for the "
                           "first item that starts with name=, and returns the rest of it.",
                       errors=["ValueError when name is not a string"],
                       examples=["# run as `tapeml this.ml`, without steps=...: the default\n"
                                 "num(script_arg(\"steps\", \"1000\")) + 1",
                                 "ARGS    # the arguments after the script's name (set by the command line)"]),
    "top_k_filter": _doc(_GEN, ML, "top_k_filter(z, top_k)",
                         "Keep the top_k largest scores; the others become -inf.",
                         what="Restricts sampling to the top_k most likely tokens: every score below the k-th "
                              "largest becomes -inf, so softmax gives it probability 0.",
                         errors=["TypeError when z is not a number or matrix",
                                 "ValueError when top_k is below 1 (next_token calls it only for "
                                 "0 < top_k < len(z); top_k = 0 there means no filter)"],
                         how="Removes the largest score top_k - 1 times to find the k-th largest, then "
                             "where(z >= kth, z, -inf); ties at the k-th score are all kept (as Hugging Face's "
                             "TopKLogitsWarper).",
                         examples=["top_k_filter([1, 5, 3, 4], 2)"]),
    "next_token": _doc(_GEN, ML, "next_token(z, temperature=1.0, top_k=0)",
                       "One token id from a vector of logits: greedy near temperature 0, else sampled.",
                       what="Chooses the next token from a model's scores: the most likely one at temperature 0, "
                            "otherwise a random draw in which a higher temperature flattens the distribution "
                            "and top_k > 0 limits the candidates.",
                       errors=["ShapeError (from sample) when z is a number rather than a vector and temperature > 1e-6",
                               "TypeError when z is not a number or matrix"],
                       how="temperature <= 1e-6: argmax(z); otherwise sample(softmax(top_k_filter(z / temperature, "
                           "top_k))) (temperature sampling as in Hugging Face's `generate`; top-k sampling from Fan et al. 2018). "
                           "Dividing by the temperature never reorders the scores; lower sharpens.",
                       examples=["next_token([1, 5, 3], 0)", "seed(0)\nnext_token([1, 5, 3], 0.8, top_k = 2)"]),
    "generate": _doc(
        _GEN, ML, "generate(logits_fn, params, ids, n_new, temperature=1.0, top_k=0, context=0)",
        "Extend a vector of token ids by n_new tokens, one prediction at a time.",
        what="Autoregressive decoding: the model scores the next token from the ids so far, one is "
             "picked (next_token) and appended, and the longer sequence goes back in.",
        how="For each new token: logits = logits_fn(params, ids) (the last row when T x V), then "
            "next_token(logits, temperature, top_k). With context > 0 only the last `context` ids are fed "
            "(a model's maximum length). No key/value cache: each step recomputes the whole window.",
        errors=["TypeError when logits_fn is not a function or ids is not a vector of numbers",
                "ValueError when n_new is negative",
                "ShapeError (from sample) when logits_fn returns a number instead of scores",
                "any error raised inside logits_fn, reported with the chain of calls"],
        examples=["bigram = [0, 1, 0; 0, 0, 1; 1, 0, 0] * 10\n"
                  "generate(fn(p, ids) -> p[ids, :], bigram, [0], 5, temperature = 0)"]),
}


# ---- parameters and results: name -> {parameter: (kind, description[, shape])} ----------------
_TREE = "a number, matrix, or tuple/record of them, nested"
_GRADS = ("tree", "the gradients: the same structure and shapes as params (what grad(loss, params) returns)")
_PARAMS = ("tree", "the parameters to update: " + _TREE)
_STATE_OF = "the optimizer state: the record {init}(params) made, then the state the last step returned"
_ADAM = {"params": _PARAMS, "grads": _GRADS,       # what the three Adam functions share
         "lr": ("number", "the learning rate, > 0"),
         "betas": ("tuple", "(b1, b2): the decay rates of the first and second moment estimates, each in [0, 1)"),
         "eps": ("number", "added to the denominator for numerical stability, > 0")}
PARAMS = {
    "zeros_like": {"tree": ("tree", _TREE)},
    "sgd_init": {"params": ("tree", "the parameters the optimizer will update: " + _TREE)},
    "sgd_step": {"params": _PARAMS, "grads": _GRADS,
                 "state": ("record", _STATE_OF.format(init="sgd_init")),
                 "lr": ("number", "the learning rate (step size), > 0"),
                 "momentum": ("number", "the momentum factor, 0 (none) to < 1"),
                 "dampening": ("number", "how much of each new gradient is held back from the momentum buffer, 0 to 1"),
                 "weight_decay": ("number", "the L2 penalty added to the gradient (weight_decay * p), >= 0"),
                 "nesterov": ("bool", "Nesterov momentum (needs momentum > 0 and dampening 0)")},
    "adam_init": {"params": ("tree", "the parameters the optimizer will update: " + _TREE)},
    "adamw_init": {"params": ("tree", "the parameters the optimizer will update: " + _TREE)},
    "adam_update": {**_ADAM, "state": ("record", "the record {step, m, v} of adam_init/adamw_init or of the last step"),
                    "decay": ("number", "every parameter is multiplied by it before the step (1: none)")},
    "adam_step": {**_ADAM, "state": ("record", _STATE_OF.format(init="adam_init")),
                  "weight_decay": ("number", "L2 penalty added to the gradient (Adam's coupled form), >= 0")},
    "adamw_step": {**_ADAM, "state": ("record", _STATE_OF.format(init="adamw_init")),
                   "weight_decay": ("number", "decoupled weight decay: each parameter shrinks by lr * weight_decay "
                                              "of itself per step, >= 0")},
    "grad_norm": {"grads": ("tree", "a gradient tree: " + _TREE)},
    "clip_grad_norm": {"grads": ("tree", "a gradient tree: " + _TREE),
                       "max_norm": ("number", "the largest global L2 norm allowed, > 0")},
    "noam_lr": {"step": ("number", "the optimizer step, counted from 1 (values below 1 count as 1)"),
                "d_model": ("number", "the model width, > 0"),
                "warmup": ("number", "the number of warmup steps, > 0"),
                "scale": ("number", "a factor on the whole schedule")},
    "cosine_lr": {"step": ("number", "the optimizer step (0 at the start)"),
                  "total": ("number", "the step at which the rate reaches lr_min"),
                  "lr_max": ("number", "the peak learning rate, reached at the end of warmup"),
                  "lr_min": ("number", "the final learning rate"),
                  "warmup": ("number", "the number of linear warmup steps (0: none)")},
    "char_vocab": {"text": ("string", "the training text")},
    "encode": {"vocab": ("string", "the vocabulary: each character once (char_vocab(text) makes one)"),
               "text": ("string", "the text to turn into ids")},
    "decode": {"vocab": ("string", "the vocabulary the ids index (0-based)"),
               "ids": ("array", "a vector of token ids, or one id", "[T] or a number")},
    "script_arg": {"name": ("string", "the option's name, as in name=value after the script's name"),
                   "default": ("string", "what to return when the option is not given (a string, like the values)")},
    "top_k_filter": {"z": ("array", "the scores (logits) of every token", "[V]"),
                     "top_k": ("int", "how many of the largest scores to keep, >= 1")},
    "next_token": {"z": ("array", "the scores (logits) of every token", "[V]"),
                   "temperature": ("number", "> 0 divides the scores before sampling (lower is sharper); "
                                             "<= 1e-6 picks the most likely token"),
                   "top_k": ("int", "sample among the top_k most likely tokens only (0: all)")},
    "generate": {"logits_fn": ("function", "fn(params, ids) -> the scores of the next token: [V], or [T, V] "
                                           "whose last row is used"),
                 "params": ("any", "passed to logits_fn unchanged (the model's weights)"),
                 "ids": ("array", "the prompt: a vector of token ids", "[T]"),
                 "n_new": ("int", "how many tokens to add, >= 0"),
                 "temperature": ("number", "as in next_token"),
                 "top_k": ("int", "as in next_token"),
                 "context": ("int", "feed only the last `context` ids to logits_fn (0: all of them)")},
}

RETURNS = {
    "zeros_like": "a tree shaped like tree, every leaf zero",
    "sgd_init": "record {step = 0, momentum_buffer}",
    "sgd_step": "tuple (params, state): the updated parameters and the state for the next step",
    "adam_init": "record {step = 0, m, v}",
    "adamw_init": "record {step = 0, m, v}",
    "adam_update": "tuple (params, state)",
    "adam_step": "tuple (params, state): the updated parameters and the state for the next step",
    "adamw_step": "tuple (params, state): the updated parameters and the state for the next step",
    "grad_norm": "number: sqrt of the sum of squares of every leaf",
    "clip_grad_norm": "the gradient tree, scaled down so its global norm is at most max_norm",
    "noam_lr": "number: the learning rate at step",
    "cosine_lr": "number: the learning rate at step",
    "char_vocab": "string: each distinct character of text once, in code-point order",
    "encode": "vector [len(text)] of 0-based ids",
    "decode": "string",
    "script_arg": "string: the option's value, or default",
    "top_k_filter": "z with every score below the k-th largest set to -inf",
    "next_token": "number: a token id (0-based)",
    "generate": "vector [T + n_new]: ids with the new tokens appended",
}

for _name, _entry in STDLIB_DOCS.items():
    _entry["param_docs"] = PARAMS.get(_name, {})
    _entry["returns"] = RETURNS.get(_name, "")
