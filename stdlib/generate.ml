# Autoregressive generation: predict the next token, append it, repeat.

# Keep the top_k largest scores; the others become -inf.
# param z (array, [V]): the scores (logits) of every token
# param top_k (int): how many of the largest scores to keep, >= 1
# returns: z with every score below the k-th largest set to -inf
# what: Restricts sampling to the top_k most likely tokens: every score below the k-th largest
#     becomes -inf, so softmax gives it probability 0.
# how: Removes the largest score top_k - 1 times to find the k-th largest, then where(z >= kth, z,
#     -inf); ties at the k-th score are all kept (as Hugging Face's TopKLogitsWarper).
# error: TypeError when z is not a number or matrix
# error: ValueError when top_k is below 1 (next_token calls it only for 0 < top_k < len(z); top_k =
#     0 there means no filter)
# example:
#     top_k_filter([1, 5, 3, 4], 2)
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

# One token id from a vector of logits: greedy near temperature 0, else sampled.
# param z (array, [V]): the scores (logits) of every token
# param temperature (number): > 0 divides the scores before sampling (lower is sharper); <= 1e-6
#     picks the most likely token
# param top_k (int): sample among the top_k most likely tokens only (0: all)
# returns: number: a token id (0-based)
# what: Chooses the next token from a model's scores: the most likely one at temperature 0,
#     otherwise a random draw in which a higher temperature flattens the distribution and top_k > 0
#     limits the candidates.
# how: temperature <= 1e-6: argmax(z); otherwise sample(softmax(top_k_filter(z / temperature,
#     top_k))) (temperature sampling as in Hugging Face's `generate`; top-k sampling from Fan et al.
#     2018). Dividing by the temperature never reorders the scores; lower sharpens.
# error: ShapeError (from sample) when z is a number rather than a vector and temperature > 1e-6
# error: TypeError when z is not a number or matrix
# example:
#     next_token([1, 5, 3], 0)
# example:
#     seed(0)
#     next_token([1, 5, 3], 0.8, top_k = 2)
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

# Extend a vector of token ids by n_new tokens, one prediction at a time.
# param logits_fn (function): fn(params, ids) -> the scores of the next token: [V], or [T, V] whose
#     last row is used
# param params (any): passed to logits_fn unchanged (the model's weights)
# param ids (array, [T]): the prompt: a vector of token ids
# param n_new (int): how many tokens to add, >= 0
# param temperature (number): as in next_token
# param top_k (int): as in next_token
# param context (int): feed only the last `context` ids to logits_fn (0: all of them)
# returns: vector [T + n_new]: ids with the new tokens appended
# what: Autoregressive decoding: the model scores the next token from the ids so far, one is picked
#     (next_token) and appended, and the longer sequence goes back in.
# how: For each new token: logits = logits_fn(params, ids) (the last row when T x V), then
#     next_token(logits, temperature, top_k). With context > 0 only the last `context` ids are fed
#     (a model's maximum length). No key/value cache: each step recomputes the whole window.
# error: TypeError when logits_fn is not a function or ids is not a vector of numbers
# error: ValueError when n_new is negative
# error: ShapeError (from sample) when logits_fn returns a number instead of scores
# error: any error raised inside logits_fn, reported with the chain of calls
# example:
#     bigram = [0, 1, 0; 0, 0, 1; 1, 0, 0] * 10
#     generate(fn(p, ids) -> p[ids, :], bigram, [0], 5, temperature = 0)
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
