# Port of nanoGPT's training loss: F.cross_entropy(logits.view(-1, V), targets.view(-1),
# ignore_index=-1), where -1 marks padded targets; the loss and its gradient against PyTorch.
# Expected values: tests/reference/make_port_reference.py.
B = 2
T = 3
V = 4
logits = sin(reshape(0:B*T*V-1, B, T, V)) * 2
targets = [0, 3, -1; 2, -1, -1]
flat = reshape(logits, B * T, V)
loss = cross_entropy(flat, reshape(targets, B * T), ignore_index=-1)
print(round(loss, 6))
g = grad(fn(z) -> cross_entropy(z, reshape(targets, B * T), ignore_index=-1), flat)
print(round(g, 4))
