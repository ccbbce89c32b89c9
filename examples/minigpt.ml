# minigpt.ml: a character-level GPT, trained from scratch in tapeml.
#
# A decoder-only transformer (token and position tables, pre-norm causal blocks, a final
# layer_norm and an output layer tied to the token table) learns to predict the next character
# of examples/data/verses.txt with AdamW and a warmup schedule, then writes some text.
#
#     tapeml examples/minigpt.ml                      # the full run (2 to 3 minutes)
#     tapeml examples/minigpt.ml steps=30 every=10    # a quick check
#     torchrun --nproc-per-node 2 -m tapeml examples/minigpt.ml   # data parallel (see "training")
#
# While it trains, a bar on standard error shows the step, the rate, the time left and the
# latest loss (TAPEML_PROGRESS=0 turns it off); standard output gets a log line every `every` steps.
#
# Options (name=value): steps, batch, context, every (print interval), seed, lr (peak), warmup (steps),
# dropout, weight_decay, samples (characters to generate), data, checkpoint (.npz path, or "none"),
# plot (PNG path, or "none"). read_text, save, load and savefig take relative paths from this
# script's directory (as import does).

steps = num(script_arg("steps", "1000"))
batch = num(script_arg("batch", "16"))
context = num(script_arg("context", "64"))
every = num(script_arg("every", "100"))
peak_lr = num(script_arg("lr", "3e-3"))
warmup = num(script_arg("warmup", "100"))
n_samples = num(script_arg("samples", "240"))
dropout = num(script_arg("dropout", "0.1"))
weight_decay = num(script_arg("weight_decay", "0.1"))
seed(num(script_arg("seed", "0")))
# a misspelled option (step=5) would otherwise be ignored, and the full run would start
options = ("steps", "batch", "context", "every", "lr", "warmup", "samples", "dropout", "weight_decay",
           "seed", "data", "checkpoint", "plot")
for a in ARGS
    known = false
    for name in options
        if len(a) > len(name) and a[0:len(name)] == name + "="
            known = true
        end
    end
    if not known
        error("minigpt.ml: unknown option '{a}'; options are name=value with a name from {options}")
    end
end
d_model = 64
n_heads = 4
n_blocks = 2

# ---- data: characters -> ids, 90% for training, 10% for validation ---------------------------
text = read_text(script_arg("data", "data/verses.txt"))
vocab = char_vocab(text)
V = len(vocab)
data = encode(vocab, text)
n_train = round(0.9 * len(data))
train_ids = data[0:n_train - 1]
val_ids = data[n_train:end]
if rank() == 0 print("text: {len(text)} characters, vocabulary of {V}, {n_train} for training, {len(val_ids)} for validation") end

# A batch of `batch` random windows: inputs x and targets y (x shifted by one character).
fn get_batch(ids, batch, context)
    starts = randint(0, len(ids) - context - 1, batch)
    pos = starts' + range(context)                  # batch x context positions
    x = reshape(ids[reshape(pos, batch * context)], batch, context)
    y = reshape(ids[reshape(pos + 1, batch * context)], batch, context)
    return (x, y)
end

# ---- the model ---------------------------------------------------------------------------------
fn init_model(V, d_model, n_heads, n_blocks, context)
    blocks = ()
    for i in 1:n_blocks
        blocks = append(blocks, transformer_block_init(d_model, n_heads))
    end
    return {tok = 0.02 * randn(V, d_model), pos = 0.02 * randn(context, d_model), blocks = blocks,
            ln_gamma = ones(d_model), ln_beta = zeros(d_model)}
end

# Logits for every position: ids is a T-vector or a B x T matrix of ids; the result is
# T x V (or B x T x V). The output layer reuses the token table (weight tying). Dropout acts
# only while training.
fn forward(params, ids, training)
    T = size(ids, len(size(ids)) - 1)
    x = embedding(params.tok, ids) + params.pos[0:T - 1, :]
    for blk in params.blocks
        x = transformer_block(x, blk, norm_first = true, causal = true, activation = "relu",
                              dropout = dropout, training = training)
    end
    return layer_norm(x, params.ln_gamma, params.ln_beta) @ params.tok'
end

fn logits_fn(params, ids)
    return forward(params, ids, false)
end

fn loss_fn(params, x, y)
    return cross_entropy(forward(params, x, true), y)
end

params = init_model(V, d_model, n_heads, n_blocks, context)
main = rank() == 0          # the process that prints and writes files (the only one, outside torchrun)
if main
    print("model: {n_blocks} pre-norm causal blocks, d_model {d_model}, {n_heads} heads, {param_count(params)} parameters")
end

# Validation loss: the mean over every non-overlapping window of the validation text, in one
# batched forward pass (the same windows every time).
fn val_loss(params, val_ids, context)
    starts = 0:context:len(val_ids) - context - 2
    pos = starts' + range(context)
    n = len(starts)
    x = reshape(val_ids[reshape(pos, n * context)], n, context)
    y = reshape(val_ids[reshape(pos + 1, n * context)], n, context)
    return cross_entropy(logits_fn(params, x), y)
end

# ---- training ----------------------------------------------------------------------------------
# Data parallel: `torchrun --nproc-per-node N -m tapeml examples/minigpt.ml` runs this script in N
# processes (ranks). Each draws the same batch (the same seed), keeps its shard (batch / N windows:
# batch must be a multiple of N) and averages the loss and the gradients with the others
# (all_reduce), so every rank takes the step of the whole batch and the parameters stay identical
# (with dropout=0 the losses are one process's on the whole batch; with dropout each rank draws the
# masks of its shard). Rank 0 prints and writes the files; each rank draws its progress bar
# (TAPEML_PROGRESS=0 turns them off). In one process shard and all_reduce change nothing.
state = adamw_init(params)
losses = zeros(steps)
val_steps = zeros(0)
val_losses = zeros(0)
start_loss = log(V)
if main
    print("initial loss {round(val_loss(params, val_ids, context), 4)} (ln {V} = {round(start_loss, 4)})")
end
t0 = clock()
for step in progress(1:steps, desc="train")         # a live bar on standard error
    x, y = get_batch(train_ids, batch, context)
    x, y = (shard(x), shard(y))                     # this rank's windows (all of them in one process)
    loss, grads = value_and_grad(fn(p) -> loss_fn(p, x, y), params)
    loss, grads = all_reduce((loss, grads))         # the mean over the ranks: the whole batch's
    progress_note("loss {round(loss, 4)}")
    grads = clip_grad_norm(grads, 1.0)
    lr = cosine_lr(step, steps, peak_lr, peak_lr / 10, warmup = warmup)
    params, state = adamw_step(params, grads, state, lr = lr, weight_decay = weight_decay)
    losses[step - 1] = loss
    if main and (step % every == 0 or step == steps)
        recent = mean(losses[max([step - every, 0]):step - 1])
        done = round(30 * step / steps)
        bar = "#" * done + "." * (30 - done)
        vl = val_loss(params, val_ids, context)
        val_steps = [val_steps, step]
        val_losses = [val_losses, vl]
        print("[{bar}] step {step}/{steps}  loss {round(recent, 4)}  val {round(vl, 4)}  lr {round(lr, 6)}  {round(clock() - t0, 1)} s")
    end
end
train_time = clock() - t0
final_train = mean(losses[max([steps - every, 0]):end])
final_val = val_loss(params, val_ids, context)
change = round(100 * (1 - final_train / start_loss), 1)
if main
    print("training took {round(train_time, 1)} s ({round(1000 * train_time / steps, 1)} ms per step)")
    print("final training loss {round(final_train, 4)}, validation loss {round(final_val, 4)}")
    if change >= 0
        print("training loss is {change}% below ln(vocab)")
    else
        print("training loss is {-change}% above ln(vocab): too few steps to learn anything yet")
    end
end

# ---- checkpoint ---------------------------------------------------------------------------------
checkpoint = script_arg("checkpoint", "minigpt_checkpoint.npz")
if checkpoint != "none" and main
    save(checkpoint, params)
    restored = load(checkpoint)
    same = true
    for pair in tree_leaves(tree_map(fn(a, b) -> all(a == b), params, restored))
        same = same and pair
    end
    print("checkpoint {checkpoint}: round-trips exactly: {same}")
end

# ---- the loss curve -----------------------------------------------------------------------------
png = script_arg("plot", "minigpt_loss.png")
if png != "none" and main
    figure()
    plot(1:steps, losses, label = "training loss (per batch)")
    plot(val_steps, val_losses, label = "validation loss")
    plot([1, steps], [start_loss, start_loss], label = "ln(vocab), a uniform guess")
    xlabel("step")
    ylabel("cross entropy (nats)")
    title("minigpt on verses.txt")
    legend()
    savefig(png)
end

# ---- text -------------------------------------------------------------------------------------------
if main
    prompt = encode(vocab, "When ")
    greedy = generate(logits_fn, params, prompt, n_samples, temperature = 0, context = context)
    print("--- greedy ---")
    print(decode(vocab, greedy))
    warm = generate(logits_fn, params, prompt, n_samples, temperature = 0.8, context = context)
    print("--- temperature 0.8 ---")
    print(decode(vocab, warm))
end
