# exit: 1
# format specs in interpolation: Python's mini-language; {x} alone keeps the printer's form
losses = [2.302585, 1.1, 0.43219, 0.0871]
for i, l in enumerate(losses)
    print("step {i:3d}  loss {l:8.4f}  {l:.2e}  {"*" * (4 - i):<4}|")
end
print("plain {losses[0]}, fixed {losses[0]:.2f}, placed {losses[0]:>12}|")
W = [0.12345, -1.5; 2, 1e-4]
print("W = {W:.3f}")
print("{(0:4)} vs {0:4}|")
print("{"name":>10}|{"name":<10}|{"name":^10}|{true:>6}|")
print("{1234567.891:,.2f} {0.125:.1%} {255:#06x} {-7:+05d}")
print("{W[0, 0]:d}")
