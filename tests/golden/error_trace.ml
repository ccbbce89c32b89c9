# exit: 1
fn inner(m)
  return m @ [1, 2, 3]
end
fn outer(m) -> inner(m) + 1
print("before")
outer([1, 2])
