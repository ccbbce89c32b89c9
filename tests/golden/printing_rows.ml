# One rule in the literal and the printer: a trailing ';' makes a one-row matrix (issue 17).
a = [1, 2;]
print(a, size(a))
b = [5;]
print(b, size(b), "vs the vector", [5], size([5]))
print([1, 2], size([1, 2]), "column", [1; 2], size([1; 2]))
c = [1, 2; 3, 4;]
print(c, size(c), all(c == [1, 2; 3, 4]))
v = [7, 8, 9]
print([v;], size([v;]), [v; v;])
r = reshape(1:3, 1, 3)
print(r, size(r), reshape(1:3, 3, 1))

# every face uses the one printer: interpolation, str, nested in tuples and records
print("interpolated {r}; transposed {r'}; str " + str(r))
print((r, [1, 2]), {row = [1, 2;], vec = [1, 2]})

# a row taken from a matrix keeps its rank; an index gives a vector
x = [1, 2, 3; 4, 5, 6]
print(x[0], x[0:0, :], x[:, 1], x[end:end, :])

# empty matrices print as the call that makes them
z = zeros(1, 0)
print(z, size(z))
print(zeros(0, 3), size(zeros(0, 3)), zeros(0, 0), size(zeros(0, 0)), [], size([]), zeros(0))
print(zeros(0, 3) > 0, x[x > 9], zeros(2, 0, 3))

# a [1, D] bias broadcasts over the rows of a [T, D] matrix
bias = [10, 20, 30;]
print(x + bias)
print(x @ eye(3) + bias, size(x @ eye(3) + bias))
print(bias', "is 3x1;", [10, 20, 30]', "too")
print(bias @ [1; 1; 1], [10, 20, 30] @ [1; 1; 1])
print(sum(x, dim=0), mean(bias), sum(bias, dim=1))

# rank 3 keeps its block form; each slice prints as its matrix would
print(reshape(1:6, 2, 1, 3))
