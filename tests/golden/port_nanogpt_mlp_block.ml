# Port of nanoGPT's MLP and the second half of Block.forward: x = x + mlp(ln_2(x)), with
# LayerNorm(bias=False) (a weight, no bias) and the exact GELU of nn.GELU().
# Expected values: tests/reference/make_port_reference.py (PyTorch).
T = 3
C = 4
x = cos(reshape(0:T*C-1, T, C))
ln_w = [1, 0.5, 2, 1.5]
w_fc = sin(reshape(0:C*4*C-1, C, 4*C)) / 2
b_fc = linspace(-0.2, 0.2, 4 * C)
w_proj = cos(reshape(0:4*C*C-1, 4*C, C)) / 3
fn mlp(x)
    return gelu(x @ w_fc + b_fc) @ w_proj
end
y = x + mlp(layer_norm(x, ln_w, zeros(C)))
print(round(y, 4))
print(round(gelu([-1, 0, 1, 3]), 6))
