# Port of numpy.einsum's documented examples: trace, diagonal, transpose, matrix-vector, inner
# and outer products, and a batched matrix product.
# Expected values: tests/reference/make_port_reference.py (NumPy).
a = reshape(0:24, 5, 5)
b = 0:4
c = reshape(0:5, 2, 3)
print(einsum("ii", a), einsum("ii->i", a))
print(einsum("ji", c))
print(einsum("ij,j", a, b), einsum("i,i", b, b))
print(einsum("i,j", 0:1, b))
p = reshape(0:11, 2, 2, 3)
q = reshape(0:17, 2, 3, 3)
print(einsum("bij,bjk->bik", p, q)[1, :, :])
print(einsum("ij,jk,kl->il", c, reshape(0:11, 3, 4), reshape(0:7, 4, 2)))
