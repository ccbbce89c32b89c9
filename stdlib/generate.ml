# Autoregressive generation: predict the next token, append it, repeat.

# Keep the top_k largest scores and set the others to -inf (ties at the k-th score are kept).
fn top_k_filter(z, top_k)
    if top_k < 1
        error("top_k_filter(): top_k must be at least 1, got {top_k}")
    end
    rest = z
    for i in 1:top_k - 1
        rest[argmax(rest)] = log(0)
    end
    return where(z >= max(rest), z, log(0))
end

# One token id drawn from a vector of logits: greedy (argmax) when temperature is near 0,
# otherwise a draw from softmax(z / temperature), over the top_k scores only when top_k > 0.
fn next_token(z, temperature = 1.0, top_k = 0)
    if temperature <= 1e-6
        return argmax(z)
    end
    z = z / temperature
    if top_k > 0 and top_k < len(z)
        z = top_k_filter(z, top_k)
    end
    return sample(softmax(z))
end

# Append n_new tokens to the id vector `ids`. logits_fn(params, ids) returns the logits
# (T x V, or a V-vector for the last position); the last row scores the next token.
# context > 0 feeds only the last `context` ids (a model's maximum length).
fn generate(logits_fn, params, ids, n_new, temperature = 1.0, top_k = 0, context = 0)
    if n_new < 0
        error("generate(): n_new is the number of tokens to add and cannot be negative, got {n_new}")
    end
    for i in 1:n_new
        window = ids
        if context > 0 and len(ids) > context
            window = ids[len(ids) - context:end]
        end
        logits = logits_fn(params, window)
        if len(size(logits)) == 2
            logits = logits[end, :]
        end
        ids = [ids, next_token(logits, temperature, top_k)]
    end
    return ids
end
