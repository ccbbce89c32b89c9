# Port of numpy.linalg.lstsq's documented example: fit y = m x + c through four points with
# A = np.vstack([x, np.ones(len(x))]).T. Expected values: tests/reference/make_port_reference.py (NumPy).
x = [0, 1, 2, 3]
y = [-1, 0.2, 0.9, 2.1]
A = concat(reshape(x, 4, 1), ones(4, 1), dim=1)
m, c = lstsq(A, y)
print(round(m, 6), round(c, 6))
print(round(sum((A @ [m, c] - y) ^ 2), 6))
