# The network card's three examples, built with transformer_block_init and counted with
# param_count. The card's block is pre-norm with a gelu feed-forward (norm_first=true,
# activation="gelu"); its parameter counts include every bias (attention, feed-forward and
# layer_norm), which is what transformer_block_init's default bias=true makes.
seed(0)

# Example 1: a ViT-style encoder block, 4 heads of width 8, a feed-forward of width 128.
w = transformer_block_init(32, 4)
x = randn(3, 8, 32)
y = transformer_block(x, w, norm_first=true, activation="gelu")
print("example 1: x {size(x)} -> out {size(y)}")
print("  {len(w.heads)} heads of width {size(w.heads[0].wq, 1)}, feed-forward width {size(w.w1, 1)}")
print("  parameters: {param_count(w)}")

# Example 2: two stacked causal rms_norm blocks, the modern decoder recipe.
blocks = (transformer_block_init(16, 2, norm="rms_norm"), transformer_block_init(16, 2, norm="rms_norm"))
x = randn(3, 6, 16)
h = x
for b in blocks
  h = transformer_block(h, b, norm_first=true, activation="gelu", norm="rms_norm", causal=true)
end
print("example 2: x {size(x)} -> out {size(h)}")
print("  per block: {param_count(blocks[0])}, both: {param_count(blocks)}")

# Example 3: the width 16 comes from a dense projection; layer scale starts the block near
# the identity. Dense layers as nn.Linear initialises them: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
fn linear_init(d_in, d_out)
  bound = 1 / sqrt(d_in)
  return {w = (rand(d_in, d_out) * 2 - 1) * bound, b = (rand(d_out) * 2 - 1) * bound}
end
model = {proj_in = linear_init(8, 16),
         block = transformer_block_init(16, 2, mlp_ratio=2, layer_scale=true),
         proj_out = linear_init(16, 8)}
x = randn(3, 6, 8)
h = dense(x, model.proj_in.w, model.proj_in.b)
h2 = transformer_block(h, model.block, norm_first=true, activation="gelu")
y = dense(h2, model.proj_out.w, model.proj_out.b)
print("example 3: x {size(x)} -> {size(h)} -> {size(h2)} -> out {size(y)}")
print("  near the identity: max |block(h) - h| = {round(max(abs(h2 - h)), 6)} (layer scale 1e-5)")
print("  parameters: {param_count(model.proj_in)} + {param_count(model.block)} + {param_count(model.proj_out)} = {param_count(model)}")
summary(model)
