fn fib(n)
  if n < 2
    return n
  end
  return fib(n - 1) + fib(n - 2)
end
print(fib(15))
fn greet(name, greeting = "hello", punct = "!")
  return "{greeting}, {name}{punct}"
end
print(greet("ada"), greet("ada", "hi"), greet("ada", punct = "?"), greet(punct = ".", name = "bob"))
make_counter = fn(start) -> fn(step) -> start + step
add10 = make_counter(10)
print(add10(5), make_counter(1)(1))
k = 2
scale = fn(x) -> x * k
k = 3
print(scale(5))
fn outer()
  y = 1
  fn inner(z) -> y + z
  y = 100
  return inner(1)
end
print(outer())
apply = fn(f, x) -> f(f(x))
print(apply(fn(v) -> v ^ 2, 3), apply(sqrt, 16))
fn nothing()
  z = 1
end
print(nothing(), type(nothing), type(sqrt))
fn early(x)
  for i in 0:10
    if i == x
      return i * 100
    end
  end
  return -1
end
print(early(3), early(20))
print(fn(a, b = 2) -> a * b)
