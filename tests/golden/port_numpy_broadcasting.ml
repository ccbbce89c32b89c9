# Port of the NumPy broadcasting guide's examples: a[:, np.newaxis] + b (an outer sum), and
# vector quantization: the code nearest to an observation by broadcasting codes - observation.
# Expected values: tests/reference/make_port_reference.py (NumPy).
a = [0, 10, 20, 30]
b = [1, 2, 3]
print(reshape(a, 4, 1) + b)
observation = [111, 188]
codes = [102, 203; 132, 193; 45, 155; 57, 173]
diff = codes - observation
dist = sqrt(sum(diff ^ 2, dim=-1))
print(round(dist, 4), argmin(dist))
x = reshape(0:3, 4, 1)
y = ones(5)
print(size(x + y), size(x * y))
z = ones(3, 4)
print(size(x' + z), sum(x' + z, dim=0))
