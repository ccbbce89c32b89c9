# Port of PyTorch's autograd tutorials: Q = 3a^3 - b^2 with Q.backward(gradient=ones) (a.grad is
# 9a^2, b.grad is -2b), and "Automatic differentiation with torch.autograd": z = x @ w + b,
# binary_cross_entropy_with_logits(z, y), w.grad and b.grad.
# Expected values: tests/reference/make_port_reference.py (PyTorch).
a = [2, 3]
b = [6, 4]
g = grad(fn(p) -> sum(3 * p.a ^ 3 - p.b ^ 2), {a = a, b = b})
print(g.a, g.b)
x = ones(5)
y = zeros(3)
w = sin(reshape(0:14, 5, 3))
bias = [0.1, -0.2, 0.3]
fn loss_of(p) -> binary_cross_entropy_with_logits(x @ p.w + p.b, y)
print(round(loss_of({w = w, b = bias}), 6))
gw = grad(loss_of, {w = w, b = bias})
print(round(gw.w, 4))
print(round(gw.b, 4))
