# exit: 1
# the output bias lives at weights.bo, not in a head
eye2 = [1.0, 0.0; 0.0, 1.0]
head = {wq = eye2, wk = eye2, wv = eye2, wo = eye2, bo = [0.0, 0.0]}
multi_head_attention([1.0, 2.0; 3.0, 4.0], (head,), 1)
