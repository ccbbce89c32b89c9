# A whole number below 2^53 in magnitude prints every digit; others keep 7 significant digits (issue 17).
print(9999999, 10000000, 10000001, 12345678, 99999999, 1e7 + 0.5, 1e7 - 0.25)
print(-4096, -18915328, 123456789012, -123456789012, 1e15, -0)
print(2^53 - 1, -(2^53 - 1), 2^53, -2^53, 2^53 + 2, 1e16, 1e21)
print(0.1, 1/3, 2.5, 1e-9, 1234567.5, -999999.75, 1000000.5, 12345678.5, 123456.75)
# in matrices, interpolation and str too
m = [18915328, -4096; 1e7, 0.5]
print(m, [2^53 - 1, 2^53;])
print("count {10000000 + 5}, total " + str(sum([1e7, 2345678])))
print(round(123456789.4), floor(-98765432.5), 2^40)
# float32 prints the number it stores
set_dtype("float32")
print([123456789, 16777217, 16777216, 0.1, -4096], sum(ones(3) * 1e7))
