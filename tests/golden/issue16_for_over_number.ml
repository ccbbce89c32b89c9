# Issue 16: a for loop over a number runs once with the number itself, and keeps the tape.
fn f(s)
  t = 0
  for v in s
    t = t + v * 2
  end
  return t
end
print(grad(f, 3))                               # 2
print(grad(fn(x) -> f(x[0]), [5, 6]))           # [2, 0]
print(grad(fn(x) -> f(x), [5, 6]), grad(fn(x) -> f((x, x * x)), 3), grad(fn(x) -> f(x:x + 2), 1))
