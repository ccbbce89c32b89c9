# Port of the Annotated Transformer's LabelSmoothing: true_dist filled with
# smoothing / (size - 2), the confidence scattered at each target, the padding column zeroed and
# the rows whose target is padding zeroed; then KLDivLoss(reduction="sum").
# Expected values: tests/reference/make_port_reference.py (PyTorch).
size_ = 5
padding_idx = 0
smoothing = 0.4
confidence = 1 - smoothing
predict = ones(5, 1) @ [0.05, 0.2, 0.6, 0.1, 0.05;]            # torch.FloatTensor([[...]] * 5)
predict[3, :] = [0.1, 0.1, 0.1, 0.6, 0.1]
target = [2, 1, 0, 3, 3]
true_dist = fill(smoothing / (size_ - 2), 5, size_)
true_dist = put_along(true_dist, target, confidence, dim=1)     # scatter_(1, target, confidence)
true_dist[:, padding_idx] = 0
true_dist = where(expand_dims(target == padding_idx, 1), 0, true_dist)   # index_fill_(0, mask, 0)
print(round(true_dist, 4))
loss = kl_div(log(predict), true_dist) * 5                     # kl_div averages the rows; KLDivLoss sums
print(round(loss, 6))
