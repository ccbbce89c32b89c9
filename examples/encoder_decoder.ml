# encoder_decoder.ml: an encoder-decoder transformer, trained from scratch to reverse digit strings.
#
# The 2017 Transformer's third stack: an encoder reads the source (6 digits), a decoder writes the
# target (the same digits, reversed) one digit at a time, reading the encoder's output through
# cross-attention. Training uses teacher forcing (the decoder sees the true previous digits, all
# positions at once); the test decodes greedily (each digit from the digits it has written) on
# held-out strings the training never sees, and prints the exact-match accuracy. The figure shows
# the loss and the decoder's cross-attention on one test string: reversal reads source position
# 5 - t at step t, an anti-diagonal.
#
#     tapeml examples/encoder_decoder.ml                  # the full run (about a minute)
#     tapeml examples/encoder_decoder.ml steps=20         # a quick check
#
# Options (name=value): steps, batch, every (print interval), lr (peak), seed, test (held-out
# strings), plot (PNG path, or "none").

steps = num(script_arg("steps", "250"))
batch = num(script_arg("batch", "64"))
every = num(script_arg("every", "25"))
peak_lr = num(script_arg("lr", "3e-3"))
n_test = num(script_arg("test", "500"))
seed(num(script_arg("seed", "0")))
options = ("steps", "batch", "every", "lr", "seed", "test", "plot")
for a in ARGS
    known = false
    for name in options
        if len(a) > len(name) and a[0:len(name)] == name + "="
            known = true
        end
    end
    if not known
        error("encoder_decoder.ml: unknown option '{a}'; options are name=value with a name from {options}")
    end
end

L = 6           # digits per string
V = 10          # the digits 0..9
BOS = 10        # the decoder's start token (its table has V + 1 rows)
d_model = 32
n_heads = 2

# ---- data -------------------------------------------------------------------------------------------
# A string is held out when a weighted checksum of its digits ends in 0 (1 string in 10, a tenth
# of every possible first five digits): the test draws only those, and training never sees one
# (a drawn one has its last digit bumped, which moves it out).
check_w = [3, 7, 9, 3, 7, 1]
fn held_out(src)
    return ((src @ check_w') % 10 == 0)[:, 0]
end

fn train_batch(n)
    src = randint(0, V, n, L)
    src[:, L - 1] = (src[:, L - 1] + held_out(src)) % V
    return src
end

fn test_set(n)
    src = randint(0, V, n, L)
    c = (src[:, 0:L - 2] @ check_w[0:L - 2]')[:, 0]
    src[:, L - 1] = (10 - c % 10) % 10       # the one last digit that makes the checksum end in 0
    return src
end

# teacher forcing: the decoder reads [BOS, y_0, ..., y_{L-2}] and is graded on [y_0, ..., y_{L-1}]
fn decoder_input(tgt)
    return [BOS * ones(size(tgt, 0), 1), tgt[:, 0:L - 2]]
end

# ---- the model: one pre-norm encoder block, one pre-norm decoder block -------------------------------
fn init_model()
    return {src_tok = 0.5 * randn(V, d_model), src_pos = 0.5 * randn(L, d_model),
            tgt_tok = 0.5 * randn(V + 1, d_model), tgt_pos = 0.5 * randn(L, d_model),
            enc = transformer_block_init(d_model, n_heads),
            enc_gamma = ones(d_model), enc_beta = zeros(d_model),
            dec = transformer_decoder_block_init(d_model, n_heads),
            dec_gamma = ones(d_model), dec_beta = zeros(d_model),
            w_out = 0.1 * randn(d_model, V), b_out = zeros(V)}
end

# the encoder's output for a B x L matrix of source digits: B x L x d_model
fn encode_src(p, src)
    x = embedding(p.src_tok, src) + p.src_pos
    x = transformer_block(x, p.enc, norm_first = true)
    return layer_norm(x, p.enc_gamma, p.enc_beta)
end

# logits B x T x V for decoder inputs B x T (T <= L), reading the encoder's output `memory`
fn decode(p, memory, dec_in)
    T = size(dec_in, 1)
    y = embedding(p.tgt_tok, dec_in) + p.tgt_pos[0:T - 1, :]
    y = transformer_decoder_block(y, memory, p.dec, norm_first = true)
    return dense(layer_norm(y, p.dec_gamma, p.dec_beta), p.w_out, p.b_out)
end

fn loss_fn(p, src)
    tgt = src[:, L - 1:-1:0]
    return cross_entropy(decode(p, encode_src(p, src), decoder_input(tgt)), tgt)
end

# greedy decoding: L steps, each appending the most likely next digit of every string at once
fn greedy(p, src)
    memory = encode_src(p, src)
    dec_in = BOS * ones(size(src, 0), 1)
    for t in 0:L - 1
        logits = decode(p, memory, dec_in)
        next = argmax(logits[:, t, :], dim = 1)
        dec_in = [dec_in, next']
    end
    return dec_in[:, 1:L]
end

params = init_model()
test_src = test_set(n_test)
print("reversing {L}-digit strings: encoder and decoder of 1 block each, d_model {d_model}, {n_heads} heads, {param_count(params)} parameters")
print("{n_test} held-out test strings (checksum ending in 0: {all(held_out(test_src))}), never drawn for training")

# ---- training -----------------------------------------------------------------------------------------
state = adamw_init(params)
losses = zeros(steps)
t0 = clock()
for step in 1:steps
    src = train_batch(batch)
    loss, grads = value_and_grad(fn(p) -> loss_fn(p, src), params)
    grads = clip_grad_norm(grads, 1.0)
    lr = cosine_lr(step, steps, peak_lr, peak_lr / 10, warmup = 30)
    params, state = adamw_step(params, grads, state, lr = lr, weight_decay = 0.01)
    losses[step - 1] = loss
    if step % every == 0 or step == steps
        recent = mean(losses[max([step - every, 0]):step - 1])
        print("step {step}/{steps}  loss {round(recent, 4)}  lr {round(lr, 6)}  {round(clock() - t0, 1)} s")
    end
end
train_time = clock() - t0
print("training took {round(train_time, 1)} s ({round(1000 * train_time / steps, 1)} ms per step)")

# ---- held-out accuracy, greedy decoding ------------------------------------------------------------------
out = greedy(params, test_src)
want = test_src[:, L - 1:-1:0]
exact = mean(sum(out == want, dim = 1) == L)
digits = mean(out == want)
print("held-out exact match {round(100 * exact, 1)}% ({round(exact * n_test)} of {n_test}), digits right {round(100 * digits, 1)}%")
for i in 0:2
    print("  {test_src[i, :]} -> {out[i, :]}")
end

# ---- the cross-attention of the trained decoder on one test string --------------------------------------
# The decoder block's cross-attention, recomputed from its parts (pre-norm): the query is
# ln2(h1), with h1 = y + self_attn(ln1(y)); memory is the encoder's output.
src = test_src[0:0, :]
memory = encode_src(params, src)[0, :, :]
y = embedding(params.tgt_tok, decoder_input(want[0:0, :])[0, :]) + params.tgt_pos
w = params.dec
h1 = y + multi_head_attention(layer_norm(y, w.ln1_gamma, w.ln1_beta), w.self_heads, n_heads, causal = true, bo = w.self_bo)
_, attn = multi_head_attention(layer_norm(h1, w.ln2_gamma, w.ln2_beta), w.cross_heads, n_heads,
                               memory = memory, bo = w.cross_bo, return_weights = true)
avg = mean(attn, 0)                     # the heads averaged: L x L
anti = mean(avg[:, L - 1:-1:0] * eye(L)) * L
print("cross-attention on the anti-diagonal (source 5 - t at step t): {round(100 * anti, 1)}% of the weight on average")

png = script_arg("plot", "encoder_decoder.png")
if png != "none"
    figure(width = 10, height = 4)
    subplot(1, 2, 0)
    plot(1:steps, losses)
    xlabel("step")
    ylabel("cross entropy (nats)")
    title("training loss (teacher forcing)")
    subplot(1, 2, 1)
    imshow(avg)
    xlabel("source position (encoder)")
    ylabel("output step (decoder)")
    title("cross-attention, {src[0, :]} -> reversed")
    savefig(png)
end
