# Port of d2l.ai's masked_softmax (chapter "Attention Scoring Functions"): valid_lens of one per
# batch element (repeat_interleave over the queries) or one per query, sequence_mask with
# value=-1e6 on the flattened scores, softmax over the last axis.
# Expected values: tests/reference/make_port_reference.py (PyTorch).
fn masked_softmax(X, valid_lens)
    shape = size(X)
    if len(size(valid_lens)) == 1
        valid_lens = repeat(valid_lens, shape[1])              # torch.repeat_interleave
    else
        valid_lens = reshape(valid_lens, numel(valid_lens))
    end
    flat = reshape(X, numel(X) / shape[2], shape[2])
    keep = reshape(0:shape[2]-1, 1, shape[2]) < expand_dims(valid_lens, 1)   # sequence_mask
    return softmax(reshape(where(keep, flat, -1e6), shape), dim=-1)
end
X = cos(reshape(0:15, 2, 2, 4)) + 1
print(round(masked_softmax(X, [2, 3]), 4)[0, :, :])
print(round(masked_softmax(X, [1, 3; 2, 4])[1, :, :], 4))
