# Gradients of a post-norm transformer block's loss, by ordinary backprop through the tape:
# no gradient rule exists for transformer_block or multi_head_attention; the tape composes
# the VJPs of layer_norm, dense, relu, scaled_dot_product_attention, + and *.
x = [1.0, 0.5, -0.3, 0.2; -0.5, 1.0, 0.4, -0.1; 0.2, -0.3, 0.8, 0.6]      # T = 3 positions, D = 4
R = [0.3, -1.2, 0.5, 0.7; 0.8, 0.1, -0.9, 0.2; -0.4, 0.9, 0.3, -0.6]     # a fixed projection of the output

fn make_head(s)
  return {wq = s * [0.9, 0.1; -0.2, 0.8; 0.3, -0.5; 0.1, 0.2],
          wk = s * [1.1, -0.3; 0.2, 0.7; -0.4, 0.1; 0.5, 0.3],
          wv = s * [0.5, 0.4; -0.6, 0.9; 0.2, -0.1; 0.3, 0.6],
          wo = s * [1.0, 0.2, -0.3, 0.1; -0.1, 0.8, 0.4, -0.2]}
end
weights = {heads = (make_head(1.0), make_head(-0.7)),
           ln1_gamma = [1.0, 0.9, 1.1, 1.0], ln1_beta = [0.1, 0.0, -0.1, 0.05],
           w1 = 0.5 * sin(reshape(1:32, 4, 8)), b1 = linspace(-0.1, 0.1, 8),
           w2 = 0.4 * cos(reshape(1:32, 8, 4)), b2 = [0.0, 0.1, -0.1, 0.2],
           ln2_gamma = [1.1, 1.0, 0.9, 1.2], ln2_beta = [0.0, -0.1, 0.1, 0.0]}

loss = fn(w) -> sum(transformer_block(x, w) * R)
value, g = value_and_grad(loss, weights)
print("loss: {value}")
print("d loss / d ln1_gamma: {g.ln1_gamma}")
print("d loss / d w1 (first two rows): {g.w1[0:1, :]}")
print("d loss / d heads[1].wq: {g.heads[1].wq}")

# the tape against central finite differences, leaf by leaf
err = check_grad(loss, weights)
print("largest relative error per leaf under 1e-6:")
print("  ln1_gamma {err.ln1_gamma < 1e-6}, w1 {err.w1 < 1e-6}, w2 {err.w2 < 1e-6}, ln2_beta {err.ln2_beta < 1e-6}")
print("  heads: {all([err.heads[0].wq, err.heads[0].wk, err.heads[0].wv, err.heads[0].wo, err.heads[1].wq, err.heads[1].wk, err.heads[1].wv, err.heads[1].wo] < 1e-6)}")
