# Port of nanoGPT's CausalSelfAttention.forward (model.py), one sequence, n_head = 2, no dropout:
# c_attn splits into q, k, v; each head masks the future with the tril buffer; c_proj mixes the
# heads. Expected values: tests/reference/make_port_reference.py (PyTorch).
T = 4
C = 6
nh = 2
hs = C / nh
x = sin(reshape(0:T*C-1, T, C)) / 2
w_attn = cos(reshape(0:C*3*C-1, C, 3*C)) / 4          # c_attn = Linear(C, 3C), as x @ w
b_attn = linspace(-0.1, 0.1, 3 * C)
w_proj = sin(reshape(0:C*C-1, C, C) / 3) / 4
qkv = x @ w_attn + b_attn
q = qkv[:, 0:C-1]
k = qkv[:, C:2*C-1]
v = qkv[:, 2*C:3*C-1]
bias = tril(ones(T, T))
heads = ()
for h in 0:nh-1
    cols = h*hs:(h+1)*hs-1
    att = q[:, cols] @ k[:, cols]' * (1 / sqrt(hs))
    att = where(bias == 0, -1/0, att)                  # masked_fill(bias == 0, float('-inf'))
    att = softmax(att, dim=-1)
    heads = heads + (att @ v[:, cols],)
end
y = concat(heads, dim=1) @ w_proj                      # y.transpose(1, 2).view(B, T, C), c_proj
print(round(y, 4))
same = scaled_dot_product_attention(q[:, 0:hs-1], k[:, 0:hs-1], v[:, 0:hs-1], causal=true)
print(allclose(same, heads[0], rtol=1e-12, atol=1e-12))
