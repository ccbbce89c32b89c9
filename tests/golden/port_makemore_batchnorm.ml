# Port of makemore part 3/4's batch normalization written out: bnmeani, the Bessel-corrected
# bnvar of the manual version (1/(n-1)), bnraw, the gain and bias, and the running statistics
# with momentum 0.001; then the batch_norm builtin, which normalizes with the biased variance
# as nn.BatchNorm1d does. Expected values: tests/reference/make_port_reference.py (PyTorch).
n = 5
hprebn = sin(reshape(0:n*3-1, n, 3)) * 3 + [1, -1, 0.5]
bngain = [1, 0.5, 2]
bnbias = [0, 0.1, -0.1]
bnmeani = mean(hprebn, dim=0, keepdims=true)
bndiff = hprebn - bnmeani
bnvar = 1 / (n - 1) * sum(bndiff ^ 2, dim=0, keepdims=true)
bnvar_inv = (bnvar + 1e-5) ^ -0.5
bnraw = bndiff * bnvar_inv
hpreact = bngain * bnraw + bnbias
print(round(hpreact[0:1, :], 4))
running_mean = 0.999 * zeros(1, 3) + 0.001 * bnmeani
running_var = 0.999 * ones(1, 3) + 0.001 * bnvar
print(round(running_mean, 6), round(running_var, 6))
out, rmean, rvar = batch_norm(hprebn, bngain, bnbias, zeros(3), ones(3), momentum=0.001)
print(round(out[0:1, :], 4))
print(round(rmean, 6), round(rvar, 6))
