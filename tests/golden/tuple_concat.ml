# exit: 1
# '+' joins tuples; '+=' appends to a tuple variable
shapes = ()
for n in (2, 3)
    shapes += (ones(n, 1),)
end
print(len(shapes), shapes + ("end",))
pairs = ()
for i, s in enumerate(("x", "y"))
    pairs += ((s, i),)
end
print(pairs)
(1, 2) * 2
