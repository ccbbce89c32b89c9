# exit: 1
# an item with the wrong count stops the loop with assignment's message, at the loop variables
for a, b in ((1, 2), (3, 4, 5))
    print(a + b)
end
