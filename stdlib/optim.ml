# Optimizers, written in tapeml. Functional and explicit: the state is a value you pass in and
# get back, and nothing is updated in place.
#
#     state = adamw_init(params)
#     params, state = adamw_step(params, grads, state, lr = 1e-3, weight_decay = 0.01)
#
# Defaults and update rules are PyTorch's torch.optim.SGD / Adam / AdamW (tests/builtins/test_train.py
# checks them against PyTorch step for step). params and grads are trees: a number, a matrix,
# or records and tuples of them, nested (what grad returns).

# The state of sgd_step: {step = 0, momentum_buffer}.
# param params (tree): the parameters the optimizer will update: a number, matrix, or tuple/record
#     of them, nested
# returns: record {step = 0, momentum_buffer}
# what: The optimizer state sgd_step starts from: step 0 and a zero momentum buffer shaped like
#     params (used only when momentum is not 0).
# how: {step = 0, momentum_buffer = zeros_like(params)}, torch.optim.SGD's per-parameter
#     `momentum_buffer` state (PyTorch creates it on the first step; here it exists from the start
#     and step 0 marks it unused).
# error: TypeError when a leaf is not a number or matrix (zeros_like refuses it)
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     sgd_init(p)
fn sgd_init(params)
    return {step = 0, momentum_buffer = zeros_like(params)}
end

# One step of stochastic gradient descent with momentum; returns (params, state).
# param params (tree): the parameters to update: a number, matrix, or tuple/record of them, nested
# param grads (tree): the gradients: the same structure and shapes as params (what grad(loss,
#     params) returns)
# param state (record): the optimizer state: the record sgd_init(params) made, then the state the
#     last step returned
# param lr (number): the learning rate (step size), >= 0 (0 leaves the parameters as they are)
# param momentum (number): the momentum factor, 0 (none) to < 1
# param dampening (number): how much of each new gradient is held back from the momentum buffer, 0
#     to 1
# param weight_decay (number): the L2 penalty added to the gradient (weight_decay * p), >= 0
# param nesterov (bool): Nesterov momentum (needs momentum > 0 and dampening 0)
# returns: tuple (params, state): the updated parameters and the state for the next step
# what: Moves every parameter against its gradient. With momentum the step follows a running sum of
#     past gradients, which smooths noisy gradients.
# how: torch.optim.SGD: g += weight_decay * p; buf = g on the first step, later buf = momentum * buf
#     + (1 - dampening) * g; g = buf (or g + momentum * buf with nesterov); p -= lr * g (Sutskever
#     et al. 2013). Checked against PyTorch for 5 steps.
# error: ValueError naming the path where grads (or the state) does not have the structure of params
#     (from tree_map)
# error: NameError when state is not a record from sgd_init (it has no field momentum_buffer)
# error: ValueError when lr or weight_decay is not a number >= 0, momentum not in [0, 1), dampening not in
#     [0, 1], or nesterov is true without momentum > 0 and dampening 0 (torch.optim.SGD's rule)
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     s = sgd_init(p)
#     p, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)
#     p, s = sgd_step(p, g, s, lr = 0.1, momentum = 0.9)
#     p
fn sgd_step(params, grads, state, lr = 0.001, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false)
    if type(lr) != "number" or not (lr >= 0)
        error("sgd_step(): lr must be a number >= 0, got {lr}")
    end
    if type(momentum) != "number" or not (momentum >= 0 and momentum < 1)
        error("sgd_step(): momentum must be a number >= 0 and < 1, got {momentum}")
    end
    if type(dampening) != "number" or not (dampening >= 0 and dampening <= 1)
        error("sgd_step(): dampening must be a number from 0 to 1, got {dampening}")
    end
    if type(weight_decay) != "number" or not (weight_decay >= 0)
        error("sgd_step(): weight_decay must be a number >= 0, got {weight_decay}")
    end
    if nesterov and (momentum == 0 or dampening != 0)
        error("sgd_step(): nesterov = true needs momentum > 0 and dampening = 0, got momentum = {momentum} and dampening = {dampening}")
    end
    if weight_decay != 0
        grads = tree_map(fn(g, p) -> g + weight_decay * p, grads, params)
    end
    buf = state.momentum_buffer
    if momentum != 0
        if state.step == 0
            buf = grads
        else
            buf = tree_map(fn(b, g) -> momentum * b + (1 - dampening) * g, buf, grads)
        end
        if nesterov
            grads = tree_map(fn(g, b) -> g + momentum * b, grads, buf)
        else
            grads = buf
        end
    end
    params = tree_map(fn(p, g) -> p - lr * g, params, grads)
    return (params, {step = state.step + 1, momentum_buffer = buf})
end

# The state of adam_step: {step = 0, m, v} with zero moments.
# param params (tree): the parameters the optimizer will update: a number, matrix, or tuple/record
#     of them, nested
# returns: record {step = 0, m, v}
# what: The optimizer state adam_step starts from: step 0 and the running first- and second-moment
#     estimates m and v, zero trees shaped like params.
# how: {step = 0, m = zeros_like(params), v = zeros_like(params)}: m_0 = v_0 = 0 as in Kingma & Ba
#     2015, Algorithm 1 (torch.optim.Adam's exp_avg and exp_avg_sq).
# error: TypeError when a leaf is not a number or matrix (zeros_like refuses it)
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     adam_init(p).step
fn adam_init(params)
    return {step = 0, m = zeros_like(params), v = zeros_like(params)}
end

# The state of adamw_step (the same as adam_init).
# param params (tree): the parameters the optimizer will update: a number, matrix, or tuple/record
#     of them, nested
# returns: record {step = 0, m, v}
# what: The optimizer state adamw_step starts from. AdamW keeps the same state as Adam (step, m, v),
#     so this is adam_init under the name that pairs with adamw_step.
# how: adam_init(params): torch.optim.AdamW keeps the same exp_avg / exp_avg_sq state as
#     torch.optim.Adam (Loshchilov & Hutter 2019, Algorithm 2: m_0 = v_0 = 0).
# error: TypeError when a leaf is not a number or matrix (zeros_like refuses it)
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     adamw_init(p).m
fn adamw_init(params)
    return adam_init(params)
end

# The Adam update shared by adam_step and adamw_step.
# param params (tree): the parameters to update: a number, matrix, or tuple/record of them, nested
# param grads (tree): the gradients: the same structure and shapes as params (what grad(loss,
#     params) returns)
# param lr (number): the learning rate, >= 0
# param betas (tuple): (b1, b2): the decay rates of the first and second moment estimates, each in
#     [0, 1)
# param eps (number): added to the denominator for numerical stability, > 0
# param state (record): the record {step, m, v} of adam_init/adamw_init or of the last step
# param decay (number): every parameter is multiplied by it before the step (1: none)
# returns: tuple (params, state)
# what: The arithmetic both Adam variants share: new moment estimates from the gradients, then each
#     parameter times decay, moved against its bias-corrected step. adam_step calls it with decay =
#     1, adamw_step with 1 - lr * weight_decay; use those.
# how: Kingma & Ba 2015, Algorithm 1, in PyTorch's order of operations: m = b1 m + (1 - b1) g; v =
#     b2 v + (1 - b2) g^2; p = p * decay - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps);
#     decay is 1 - lr * weight_decay for AdamW, 1 for Adam.
# error: ValueError naming the path where grads or the state's moments do not have the structure of
#     params (from tree_map)
# error: ValueError when lr is not a number >= 0, betas not two numbers each in [0, 1), or eps not > 0
# error: NameError when state has no field step, m or v
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     adam_update(p, g, adam_init(p), 0.1, (0.9, 0.999), 1e-8)[0]
fn adam_update(params, grads, state, lr, betas, eps, decay = 1)
    if type(lr) != "number" or not (lr >= 0)
        error("lr must be a number >= 0, got {lr}")
    end
    if type(betas) != "tuple" or len(betas) != 2
        error("betas must be a tuple of two numbers (b1, b2), such as (0.9, 0.999); got {betas}")
    end
    if not (betas[0] >= 0 and betas[0] < 1 and betas[1] >= 0 and betas[1] < 1)
        error("betas must each be >= 0 and < 1, got {betas}")
    end
    if type(eps) != "number" or not (eps > 0)
        error("eps must be a number > 0, got {eps} (it keeps the step finite where a gradient's mean square is 0)")
    end
    b1 = betas[0]
    b2 = betas[1]
    t = state.step + 1
    m = tree_map(fn(m, g) -> b1 * m + (1 - b1) * g, state.m, grads)
    v = tree_map(fn(v, g) -> b2 * v + (1 - b2) * g * g, state.v, grads)
    step_size = lr / (1 - b1 ^ t)
    bc2_sqrt = sqrt(1 - b2 ^ t)
    params = tree_map(fn(p, m, v) -> p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps), params, m, v)
    return (params, {step = t, m = m, v = v})
end

# One Adam step; returns (params, state).
# param params (tree): the parameters to update: a number, matrix, or tuple/record of them, nested
# param grads (tree): the gradients: the same structure and shapes as params (what grad(loss,
#     params) returns)
# param lr (number): the learning rate, >= 0
# param betas (tuple): (b1, b2): the decay rates of the first and second moment estimates, each in
#     [0, 1)
# param eps (number): added to the denominator for numerical stability, > 0
# param state (record): the optimizer state: the record adam_init(params) made, then the state the
#     last step returned
# param weight_decay (number): L2 penalty added to the gradient (Adam's coupled form), >= 0
# returns: tuple (params, state): the updated parameters and the state for the next step
# what: Adam scales each parameter's step by running estimates of the mean and the mean square of
#     its gradient, so every parameter moves at a similar rate whatever its gradient's scale.
# how: Kingma & Ba 2015, Algorithm 1, with PyTorch's arithmetic (torch.optim.Adam): g +=
#     weight_decay * p (L2); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) *
#     m / (sqrt(v) / sqrt(1 - b2^t) + eps). Checked against PyTorch for 5 steps. amsgrad and
#     maximize are not supported.
# error: ValueError naming the path where grads (or the state) does not have the structure of params
#     (from tree_map)
# error: NameError when state is not a record from adam_init (no field step, m or v)
# error: ValueError when lr or weight_decay is not a number >= 0, betas not two numbers each in [0, 1), or
#     eps is not > 0
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     s = adam_init(p)
#     p, s = adam_step(p, g, s, lr = 0.1)
#     print(p, s.step)
fn adam_step(params, grads, state, lr = 0.001, betas = (0.9, 0.999), eps = 1e-8, weight_decay = 0)
    if type(weight_decay) != "number" or not (weight_decay >= 0)
        error("weight_decay must be a number >= 0, got {weight_decay}")
    end
    if weight_decay != 0
        grads = tree_map(fn(g, p) -> g + weight_decay * p, grads, params)
    end
    return adam_update(params, grads, state, lr, betas, eps)
end

# One AdamW step (Adam with decoupled weight decay); returns (params, state).
# param params (tree): the parameters to update: a number, matrix, or tuple/record of them, nested
# param grads (tree): the gradients: the same structure and shapes as params (what grad(loss,
#     params) returns)
# param lr (number): the learning rate, >= 0
# param betas (tuple): (b1, b2): the decay rates of the first and second moment estimates, each in
#     [0, 1)
# param eps (number): added to the denominator for numerical stability, > 0
# param state (record): the optimizer state: the record adamw_init(params) made, then the state the
#     last step returned
# param weight_decay (number): decoupled weight decay: each parameter shrinks by lr * weight_decay
#     of itself per step, >= 0
# returns: tuple (params, state): the updated parameters and the state for the next step
# what: The optimizer of most transformer training: Adam, plus a weight decay that shrinks the
#     parameters directly instead of adding to the gradient.
# how: Loshchilov & Hutter 2019 as torch.optim.AdamW: p = p * (1 - lr * weight_decay), then the Adam
#     update of adam_step. Checked against PyTorch for 5 steps.
# error: ValueError naming the path where grads (or the state) does not have the structure of params
#     (from tree_map)
# error: NameError when state is not a record from adamw_init (no field step, m or v)
# error: ValueError when lr or weight_decay is not a number >= 0, betas not two numbers each in [0, 1), or
#     eps is not > 0
# example:
#     p = {w = [1.0, 2.0], b = 0.5}
#     g = {w = [0.1, -0.2], b = 1.0}
#     s = adamw_init(p)
#     p, s = adamw_step(p, g, s, lr = 0.1, weight_decay = 0.01)
#     p
fn adamw_step(params, grads, state, lr = 0.001, betas = (0.9, 0.999), eps = 1e-8, weight_decay = 0.01)
    if type(lr) != "number" or not (lr >= 0)
        error("lr must be a number >= 0, got {lr}")
    end
    if type(weight_decay) != "number" or not (weight_decay >= 0)
        error("weight_decay must be a number >= 0, got {weight_decay}")
    end
    return adam_update(params, grads, state, lr, betas, eps, 1 - lr * weight_decay)
end

# The global L2 norm of a gradient tree.
# param grads (tree): a gradient tree: a number, matrix, or tuple/record of them, nested
# returns: number: sqrt of the sum of squares of every leaf
# what: One number for the size of a whole gradient: the Euclidean length of all elements of all
#     leaves taken together. Logged during training, and what clip_grad_norm limits.
# how: sqrt(sum over leaves of sum(g^2)), the total norm of torch.nn.utils.clip_grad_norm_
#     (norm_type 2); an empty tree gives 0. When the sum of squares overflows (elements beyond about
#     1e154, 1e19 in float32) or underflows, it is the norm of the leaves' norms instead, each from
#     norm (which scales a vector by a power of 2 first), so the norm and its gradient are exact
#     wherever they are representable.
# error: TypeError when a leaf is not a number or matrix (g * g fails)
# example:
#     grad_norm({w = [3, 0], b = 4})
# example:
#     grad_norm({w = [3e200, 0], b = 4e200})
fn grad_norm(grads)
    total = 0
    for g in tree_leaves(grads)
        total = total + sum(g * g)
    end
    if not (total < 1e-30 or total == 1 / 0)
        return sqrt(total)
    end
    norms = zeros(0)
    for g in tree_leaves(grads)
        norms = [norms, norm(g)]
    end
    return norm(norms)
end

# The gradient tree scaled down so that its global norm is at most max_norm.
# param grads (tree): a gradient tree: a number, matrix, or tuple/record of them, nested
# param max_norm (number): the largest global L2 norm allowed, >= 0
# returns: the gradient tree, scaled down so its global norm is at most max_norm
# what: Guards against a single huge gradient step (exploding gradients).
# how: torch.nn.utils.clip_grad_norm_: coef = min(max_norm / (grad_norm(grads) + 1e-6), 1); every
#     leaf times coef. Returns the clipped tree (use grad_norm for the norm itself).
# error: TypeError when a leaf is not a number or matrix
# error: ValueError when max_norm is not a number >= 0 (negative, NaN, a bool or a matrix)
# example:
#     clip_grad_norm({w = [3, 0], b = 4}, 1)
fn clip_grad_norm(grads, max_norm)
    if type(max_norm) != "number" or not (max_norm >= 0)
        error("max_norm must be a number >= 0, got {max_norm}")
    end
    coef = min([max_norm / (grad_norm(grads) + 1e-6), 1])
    return tree_map(fn(g) -> g * coef, grads)
end
