# precedence and associativity, lowest first: or, and, not, comparison, range, + -, * / % @, unary, ^, postfix
print(-2^2, 2^-1, 2^3^2, -3^2 + 1, (-2)^2)
print(1 + 2 * 3, (1 + 2) * 3, 7 % 3, -7 % 3, 10 / 4)
print(1 < 2 and 2 < 3, not 1 > 2, true or false and false, not true == false)
print([1, 2; 3, 4] * [1, 2; 3, 4], [1, 2; 3, 4] @ [1, 2; 3, 4])
print([1, 2] @ [3, 4], [1, 2; 3, 4] @ [1, 1], [1, 1] @ [1, 2; 3, 4])
print([1, 2; 3, 4]', [1, 2]', [1, 2]'', [1, 2, 3] + [10; 20])
print(1:4, 0:2:6, 5:-2:1, 1:0, 0.5:0.25:1)
print([1, 2, 3] == [1, 5, 3], [1, 2, 3] >= 2, "ab" == "ab", "a" + "b", none == none)
print(2 * [1, 2] - 1, [1, 2, 3] / 2, 1 / 0, -1 / 0, 0 / 0)
x = 3
print(-x^2, x^0.5 * x^0.5, +x)
