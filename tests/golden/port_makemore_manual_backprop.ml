# Port of makemore part 4 (backprop ninja), the MLP without batchnorm: the backward pass written
# by hand (dlogits = softmax - one-hot over n, tanh' = 1 - h^2, dC scattered row by row as
# Karpathy's loop does) and checked against grad. Expected values: tests/reference/make_port_reference.py (PyTorch).
n = 4
Xb = [0, 0, 1; 0, 1, 2; 1, 2, 3; 2, 3, 0]
Yb = [2, 3, 0, 1]
C = sin(reshape(0:5*2-1, 5, 2))
W1 = cos(reshape(0:6*4-1, 6, 4)) / 2
b1 = [0.1, -0.1, 0.2, 0]
W2 = sin(reshape(0:4*5-1, 4, 5) / 3)
b2 = [0, 0.1, 0, -0.1, 0]
emb = embedding(C, Xb)
embcat = reshape(emb, n, 6)
h = tanh(embcat @ W1 + b1)
logits = h @ W2 + b2
loss = cross_entropy(logits, Yb)
print(round(loss, 6))
dlogits = add_along(softmax(logits), Yb, -1) / n     # dlogits[range(n), Yb] -= 1; dlogits /= n
dh = dlogits @ W2'
dW2 = h' @ dlogits
db2 = sum(dlogits, dim=0)
dhpre = (1 - h ^ 2) * dh
dW1 = embcat' @ dhpre
db1 = sum(dhpre, dim=0)
demb = reshape(dhpre @ W1', n, 3, 2)
dC = zeros(size(C))
for k in 0:n-1
    for j in 0:2
        dC[Xb[k, j], :] += demb[k, j, :]
    end
end
print(round(dW2[0, :], 4))
print(round(db1, 4))
print(round(dC, 4))
fn loss_of(p)
    hh = tanh(reshape(embedding(p.C, Xb), n, 6) @ p.W1 + p.b1)
    return cross_entropy(hh @ p.W2 + p.b2, Yb)
end
g = grad(loss_of, {C = C, W1 = W1, b1 = b1, W2 = W2, b2 = b2})
print(max(abs(g.C - dC)) < 1e-12, max(abs(g.W1 - dW1)) < 1e-12, max(abs(g.W2 - dW2)) < 1e-12,
      max(abs(g.b1 - db1)) < 1e-12, max(abs(g.b2 - db2)) < 1e-12)
