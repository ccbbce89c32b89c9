# Port of the Annotated Transformer's attention() and the multi-head split:
# scores = query @ key.transpose(-2, -1) / sqrt(d_k), masked_fill(mask == 0, -1e9), softmax,
# p_attn @ value, over [B, h, T, d_k] with a [B, 1, 1, T] source padding mask; compared with
# scaled_dot_product_attention. Expected values: tests/reference/make_port_reference.py (PyTorch).
B = 2
T = 3
h = 2
d_model = 4
d_k = d_model / h
x = sin(reshape(0:B*T*d_model-1, B, T, d_model))
Wq = cos(reshape(0:15, 4, 4)) / 2
Wk = sin(reshape(0:15, 4, 4) / 2)
Wv = cos(reshape(0:15, 4, 4) / 3)
src = [3, 4, 0; 5, 0, 0]
mask = expand_dims(expand_dims(src != 0, 1), 1)                 # (src != pad).unsqueeze(-2), then unsqueeze(1)
fn split(y)
    return permute(reshape(y, B, T, h, d_k), 0, 2, 1, 3)        # view(B, -1, h, d_k).transpose(1, 2)
end
q = split(x @ Wq)
k = split(x @ Wk)
v = split(x @ Wv)
scores = q @ permute(k, 0, 1, 3, 2) / sqrt(d_k)
scores = where(mask == false, -1e9, scores)
p_attn = softmax(scores, dim=-1)
out = p_attn @ v
print(size(out))
print(round(p_attn[1, 0, :, :], 4))
print(round(reshape(permute(out, 0, 2, 1, 3), B, T, d_model)[0, :, :], 4))
print(allclose(out, scaled_dot_product_attention(q, k, v, mask=mask), rtol=1e-9, atol=1e-12))
