# Issue 16: each index keeps its own axis, in order, in any rank (NumPy would move the
# vector's axis to the front and give 2x3 here).
a = reshape(0:23, 2, 3, 4)
print(a[1, :, [1, 0]])          # [13, 12; 17, 16; 21, 20] (3x2)
b = zeros(2, 3, 4)
b[1, :, [1, 0]] = [1, 2; 3, 4; 5, 6]
print(b[1])
print(size(a[:, end, [3, 0, 0]]), size(a[[true, false], 1:2, end]))
print(grad(fn(x) -> sum(x[1, :, [1, 0]] * [1, 2; 3, 4; 5, 6]), a)[1])
