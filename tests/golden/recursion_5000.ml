# A 5,000-deep recursion prints 5000 on every supported Python (3.10 segfaulted: issue 14)
fn f(n)
  if n == 0
    return 0
  end
  return 1 + f(n - 1)
end
print(f(5000))
