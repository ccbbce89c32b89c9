# Issue 15, item 1: through a repeated index the last write wins, and the gradient agrees.
fn g(v)
    x = zeros(3)
    x[[0, 0]] = v
    return sum(x * [1, 2, 3])
end
print(g([10, 20]), grad(g, [10, 20]))     # 20 [0, 1]
print(check_grad(g, [10, 20]) < 1e-6)
fn h(v)
    x = [1, 2, 3]
    x[[0, 0]] += v                        # x[idx] = x[idx] + v: the repeat adds once
    return sum(x * [1, 2, 3])
end
print(h([10, 20]), grad(h, [10, 20]), grad(fn(w) -> h(w * [1, 1]), 1))
