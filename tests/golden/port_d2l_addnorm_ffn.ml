# Port of d2l.ai's PositionWiseFFN and AddNorm (chapter "The Transformer Architecture"):
# dense2(relu(dense1(X))), then LayerNorm(dropout(Y) + X) in evaluation (no dropout), over the
# last axis of a [2, 3, 4] batch. Expected values: tests/reference/make_port_reference.py (PyTorch).
X = sin(reshape(0:23, 2, 3, 4))
W1 = cos(reshape(0:4*8-1, 4, 8)) / 2
b1 = linspace(-0.3, 0.3, 8)
W2 = sin(reshape(0:8*4-1, 8, 4) / 5)
b2 = [0.1, 0, -0.1, 0.2]
fn ffn(X) -> dense(relu(dense(X, W1, b1)), W2, b2)
fn add_norm(X, Y) -> layer_norm(Y + X, ones(4), zeros(4))
Y = add_norm(X, ffn(X))
print(size(Y))
print(round(Y[1, :, :], 4))
print(round(mean(Y, dim=-1), 6))
