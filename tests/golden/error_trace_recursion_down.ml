# exit: 1
# A recursion's repeated frames collapse into one line and a count.
fn down(n)
  if n == 0
    return [1, 2] @ [1, 2, 3]
  end
  return down(n - 1)
end
print("start")
down(30)
