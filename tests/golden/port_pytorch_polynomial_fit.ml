# Port of PyTorch's "Learning PyTorch with Examples", the NumPy warm-up: fit sin(x) on [-pi, pi]
# with a + b x + c x^2 + d x^3 by gradient descent with hand-written gradients (2000 points,
# learning rate 1e-6); fixed starting weights instead of the tutorial's random ones.
# Expected values: tests/reference/make_port_reference.py (NumPy, the tutorial's loop).
x = linspace(-pi(), pi(), 2000)
y = sin(x)
a = 0.1
b = 0.2
c = -0.1
d = 0.05
learning_rate = 1e-6
for t in 0:1999
    y_pred = a + b * x + c * x ^ 2 + d * x ^ 3
    loss = sum((y_pred - y) ^ 2)
    if t % 500 == 499
        print(t, round(loss, 4))
    end
    grad_y_pred = 2 * (y_pred - y)
    a -= learning_rate * sum(grad_y_pred)
    b -= learning_rate * sum(grad_y_pred * x)
    c -= learning_rate * sum(grad_y_pred * x ^ 2)
    d -= learning_rate * sum(grad_y_pred * x ^ 3)
end
print("y = {round(a, 4)} + {round(b, 4)} x + {round(c, 4)} x^2 + {round(d, 4)} x^3")
