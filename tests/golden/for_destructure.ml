# for destructuring: each item unpacked as 'a, b = item'
names = ("ada", "bob", "cy")
for i, name in enumerate(names)
    print(i, name)
end
total = 0
for x, w in zip([1, 2, 3], [0.5, 0.25, 2])
    total += x * w
end
print(total)
for row, label in zip([1, 2; 3, 4], ("first", "second"))
    print(label, sum(row))
end
for k, pair in enumerate(zip((1, 2), ("a", "b")))
    print(k, pair)
end
fn weighted(W)
    s = 0
    for i, row in enumerate(W)
        s += (i + 1) * sum(row ^ 2)
    end
    return s
end
print(grad(weighted, [1, 2; 3, 4]))
