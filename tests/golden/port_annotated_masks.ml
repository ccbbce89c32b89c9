# Port of the Annotated Transformer's subsequent_mask and Batch.make_std_mask:
# (tgt != pad).unsqueeze(-2) & subsequent_mask(T), a [B, 1, T] padding mask broadcast against a
# [1, T, T] causal one; then the masks in use, scores.masked_fill(mask == 0, -1e9) before the
# softmax. Expected values: tests/reference/make_port_reference.py (PyTorch).
fn subsequent_mask(size)
    return expand_dims(triu(ones(size, size), 1), 0) == 0
end
pad = 2
tgt = [0, 5, 7, 4, 2; 0, 6, 2, 2, 2]
tgt_mask = expand_dims(tgt != pad, 1) and subsequent_mask(5)
print(size(tgt_mask))
print(tgt_mask[1, :, :])
print(sum(tgt_mask, dim=2))
scores = sin(reshape(0:2*5*5-1, 2, 5, 5)) * 3
p_attn = softmax(where(tgt_mask == false, -1e9, scores), dim=-1)
print(round(p_attn[1, :, :], 4))
