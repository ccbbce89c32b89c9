total = 0
for i in 1:10
  if i % 2 == 0
    continue
  elif i > 7
    break
  else
    total += i
  end
end
print(total)
n = 0
while n < 5
  n += 2
end
print(n)
for row in [1, 2; 3, 4]
  print(row)
end
for item in (1, "two", [3])
  print(type(item))
end
for ch in "abc"
  print(ch)
end
for i in 1:0
  print("never")
end
for v in [5, 6]
  w = v
end
print(w, v)
if false
  print("no")
elif 1 > 2
  print("no")
else
  print("else branch")
end
