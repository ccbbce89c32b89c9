# Each recipe row of the network card's correspondence table, built with transformer_block_init
# and run on a batch [B, T, D] = [2, 5, 16] with 4 heads. The card's block is pre-norm with a
# gelu feed-forward; each row adds its own options.
seed(1)
x = randn(2, 5, 16)
# the same batch with the last position changed: a causal block's earlier outputs must not move
x2 = x
x2[:, 4, :] = randn(2, 16)

fn run(name, w, norm, causal, activation)
  y = transformer_block(x, w, norm_first=true, norm=norm, causal=causal, activation=activation)
  y2 = transformer_block(x2, w, norm_first=true, norm=norm, causal=causal, activation=activation)
  past_same = max(abs(y2[:, 0:3, :] - y[:, 0:3, :])) < 1e-12
  print("{name}: out {size(y)}, parameters {param_count(w)}, earlier positions unchanged by the last: {past_same}")
  print("  out[0, 0, 0:3] = {round(y[0, 0, 0:3], 4)}")
  return y
end

gpt2 = run("GPT-2 (gelu_tanh, causal)", transformer_block_init(16, 4, seed=10), "layer_norm", true, "gelu_tanh")
vit = run("ViT / BERT-style encoder", transformer_block_init(16, 4, seed=11), "layer_norm", false, "gelu")
llama = run("LLaMA-style decoder (rms_norm, causal)", transformer_block_init(16, 4, norm="rms_norm", seed=12),
            "rms_norm", true, "gelu")
cait = run("CaiT / DINOv2 (layer scale)", transformer_block_init(16, 4, layer_scale=true, seed=13),
           "layer_norm", false, "gelu")
print("CaiT starts near the identity: {max(abs(cait - x)) < 1e-3}")

# The batch dimension is only a batch: each example alone gives the same rows.
w = transformer_block_init(16, 4, seed=10)
alone = transformer_block(x[1, :, :], w, norm_first=true, causal=true, activation="gelu_tanh")
print("batched row 1 equals the unbatched run: {max(abs(gpt2[1, :, :] - alone)) < 1e-12}")
