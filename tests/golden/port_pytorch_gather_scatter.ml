# Port of the PyTorch docs' examples of torch.gather (t, 1, [[0, 0], [1, 0]]) and
# Tensor.scatter_add_ (dim 0 of a 3 x 5 zeros), as take_along and add_along, and of NumPy's
# take_along_axis with argsort. Expected values: tests/reference/make_port_reference.py (PyTorch, NumPy).
t = [1, 2; 3, 4]
print(take_along(t, [0, 0; 1, 0], dim=1))
src = ones(2, 5)
index = [0, 1, 2, 0, 0; 2, 0, 0, 1, 2]
print(add_along(zeros(3, 5), index, src, dim=0))
a = [10, 30, 20; 60, 40, 50]
ai = argsort(a, dim=1)
print(ai, take_along(a, ai, dim=1))
print(take_along(a, expand_dims(argmax(a, dim=1), 1), dim=1))
