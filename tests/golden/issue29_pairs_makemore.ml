# makemore's bigram with its manual backward pass (issue 29): the pairs by take_along and
# add_along, checked against grad; the grid line prints its note on standard error once.
xs = [0, 1, 2, 3, 1, 0, 4, 2]
ys = [1, 2, 3, 1, 0, 4, 2, 0]
n = len(xs)
W = sin(reshape(0:24, 5, 5))
fn loss_of(W)
    probs = softmax(one_hot(xs, 5) @ W)
    return -mean(log(take_along(probs, ys)))
end
probs = softmax(one_hot(xs, 5) @ W)
loss = -mean(log(take_along(probs, ys)))
print(round(loss, 6))
dlogits = add_along(probs, ys, -1) / n
dW = one_hot(xs, 5)' @ dlogits
print(round(dW[0, :], 6))
print(max(abs(dW - grad(loss_of, W))) < 1e-15)
for step in 1:2
    grid = probs[0:n-1, ys]
end
print(size(grid), round(-mean(log(grid)), 6))
print(all(diag(grid) == take_along(probs, ys)), round(take_along(probs, ys)[[0, end]], 6))
