# Port of makemore part 2 (the MLP of Bengio et al.): context windows of 3 ids, C[X] embeds
# them, emb.view(-1, 6), a tanh hidden layer, logits and F.cross_entropy.
# Expected values: tests/reference/make_port_reference.py (PyTorch).
block_size = 3
word = [5, 13, 13, 1]                       # "emma" as ids; 0 is '.'
X = zeros(0, block_size)
Y = zeros(0)
context = [0, 0, 0]
for ix in [word, 0]
    X = concat(X, reshape(context, 1, block_size))
    Y = [Y, ix]
    context = [context[1:end], ix]
end
print(X)
C = sin(reshape(0:27*2-1, 27, 2))
W1 = cos(reshape(0:6*10-1, 6, 10)) / 2
b1 = linspace(-0.5, 0.5, 10)
W2 = sin(reshape(0:10*27-1, 10, 27) / 7)
b2 = zeros(27)
emb = embedding(C, X)                         # PyTorch: emb = C[X]
print(size(emb))
h = tanh(reshape(emb, size(emb, 0), 6) @ W1 + b1)
logits = h @ W2 + b2
print(round(h[0, :], 4))
print(round(cross_entropy(logits, Y), 6))
