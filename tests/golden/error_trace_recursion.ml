# exit: 1
# Mutual recursion: the repeated cycle of two calls (even, odd) collapses into one count.
fn down(n)
  if n == 0
    return [1, 2] @ [1, 2, 3]
  end
  return down(n - 1)
end
fn even(n)
  if n == 0
    return undefined_name
  end
  return odd(n - 1)
end
fn odd(n) -> even(n - 1)
print(even(6))
