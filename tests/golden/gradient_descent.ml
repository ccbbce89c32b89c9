# 100 steps of plain gradient descent on a small least-squares regression, grad inside a loop
X = [1, 0.5; 1, 1.5; 1, 2.0; 1, 3.5; 1, 4.0]
y = [1.1, 2.9, 4.2, 6.8, 8.1]
w = [0, 0]
loss = fn(w) -> mean((X @ w - y)^2)
lr = 0.05
for step in 1:100
  l, g = value_and_grad(loss, w)
  if step == 1 or step % 20 == 0
    print("step {step}: loss {l}")
  end
  w = w - lr * g
end
print("w = {w}, final loss {loss(w)}")
