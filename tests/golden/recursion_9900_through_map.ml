# 9,900 levels of recursion through map (19,800 nested calls, under the limit of 20,000) work
# (issue 25: they used to segfault)
fn f(n)
    if n == 0
        return 0
    end
    return map(fn(x) -> f(x - 1), [n])[0] + 1
end
print(f(9900))
