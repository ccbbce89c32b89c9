# Optimizers, written in tapeml. Functional and explicit: the state is a value you pass in and
# get back, and nothing is updated in place.
#
#     state = adamw_init(params)
#     params, state = adamw_step(params, grads, state, lr = 1e-3, weight_decay = 0.01)
#
# Defaults and update rules are PyTorch's torch.optim.SGD / Adam / AdamW (tests/test_train.py
# checks them against PyTorch step for step). params and grads are trees: a number, a matrix,
# or records and tuples of them, nested (what grad returns).

# A tree shaped like `tree` with every leaf zero.
fn zeros_like(tree)
    return tree_map(fn(p) -> 0 * p, tree)
end

# State of sgd_step: the step count and one momentum buffer per parameter.
fn sgd_init(params)
    return {step = 0, momentum_buffer = zeros_like(params)}
end

# One SGD step (torch.optim.SGD): with momentum mu, buf = mu * buf + (1 - dampening) * g
# (buf = g on the first step), then p = p - lr * buf (or g + mu * buf with nesterov).
fn sgd_step(params, grads, state, lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false)
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

# State of adam_step and adamw_step: the step count and the two moment estimates.
fn adam_init(params)
    return {step = 0, m = zeros_like(params), v = zeros_like(params)}
end

fn adamw_init(params)
    return adam_init(params)
end

# The shared Adam update (Kingma & Ba 2015, Algorithm 1, in PyTorch's arithmetic); each
# parameter is first multiplied by `decay` (AdamW's decoupled weight decay; 1 for Adam).
fn adam_update(params, grads, state, lr, betas, eps, decay = 1)
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

# One Adam step (torch.optim.Adam): weight_decay is an L2 term added to the gradient.
fn adam_step(params, grads, state, lr = 1e-3, betas = (0.9, 0.999), eps = 1e-8, weight_decay = 0)
    if weight_decay != 0
        grads = tree_map(fn(g, p) -> g + weight_decay * p, grads, params)
    end
    return adam_update(params, grads, state, lr, betas, eps)
end

# One AdamW step (torch.optim.AdamW; Loshchilov & Hutter 2019): decoupled weight decay,
# p = p * (1 - lr * weight_decay), then the Adam update.
fn adamw_step(params, grads, state, lr = 1e-3, betas = (0.9, 0.999), eps = 1e-8, weight_decay = 0.01)
    return adam_update(params, grads, state, lr, betas, eps, 1 - lr * weight_decay)
end

# The global L2 norm of a gradient tree: sqrt of the sum of every squared element. When the
# sum of squares overflows (entries beyond about 1e154, 1e19 in float32) or underflows, though
# the norm itself is representable, the leaves are divided by the largest |g| first.
fn grad_norm(grads)
    total = 0
    for g in tree_leaves(grads)
        total = total + sum(g * g)
    end
    if not (total < 1e-30 or total == 1 / 0)
        return sqrt(total)
    end
    m = 0
    for g in tree_leaves(grads)
        if sum(abs(g)) > 0
            m = max(m, max(abs(g)))
        end
    end
    if m == 0 or m == 1 / 0
        return m
    end
    total = 0
    for g in tree_leaves(grads)
        total = total + sum((g / m) * (g / m))
    end
    return m * sqrt(total)
end

# Scale the whole gradient tree down so that its global norm is at most max_norm
# (torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1).
fn clip_grad_norm(grads, max_norm)
    coef = min([max_norm / (grad_norm(grads) + 1e-6), 1])
    return tree_map(fn(g) -> g * coef, grads)
end
