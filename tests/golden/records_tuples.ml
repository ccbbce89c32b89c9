w = {wq = [1, 0; 0, 1], name = "layer", inner = {scale = 2}}
print(w.wq, w.name, w.inner.scale, len(w))
w2 = w
w2.inner.scale = 3
print(w.inner.scale, w2.inner.scale)
pair = (1, [2, 3])
a, b = pair
print(a, b)
fn minmax(v) -> (min(v), max(v))
lo, hi = minmax([3, 1, 4, 1, 5])
print(lo, hi)
print({} == {}, (1, 2) == (1, 2), {a = 1} == {a = 2}, type(()), size(zeros(2, 3)))
