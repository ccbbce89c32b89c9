# exit: 1
# A runaway recursion through map (a builtin that calls its function back) stops at the same
# limit and with the same RecursionError as a direct one (issue 25: it used to segfault)
fn f(n) -> map(fn(x) -> f(x + 1), [n])
f(0)
