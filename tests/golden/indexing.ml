x = [10, 20, 30, 40, 50]
print(x[0], x[end], x[1:3], x[end-1:end], x[[0, 2, 4]], x[x > 25], x[0:2:end], x[end:-1:0])
m = [1, 2, 3; 4, 5, 6; 7, 8, 9]
print(m[0, 0], m[2, end], m[1], m[:, 1], m[0:1, :], m[1:end, 1:end], m[[0, 2], [0, 2]], m[m > 4])
print(m[end, :], size(m[0, :]), size(m[0:0, :]), m[[true, false, true], 0])
t = (1, "a", [2, 3])
print(t[0], t[end], t[1:2], len(t))
s = "héllo"
print(s[0], s[1:end], len(s))
# index assignment: value semantics, never visible through another name
a = [1, 2, 3]
b = a
b[0] = 100
print(a, b)
m2 = m
m2[:, 0] = 0
m2[end, end] = -1
print(m, m2)
c = a
c += 1
c[1:2] -= [5, 5]
c[0] *= 2
c[end] /= 4
print(a, c)
r = {w = [1, 2], inner = {v = 1}}
r2 = r
r2.w[0] = 9
r2.inner.v = 2
r2.extra = "new"
print(r, r2)
tt = (1, 2, 3)
tt2 = tt
tt2[1] = 20
print(tt, tt2)
