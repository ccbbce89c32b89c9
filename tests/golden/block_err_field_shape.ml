# exit: 1
# a field of the wrong shape names the path and both shapes
w = transformer_block_init(4, 2, mlp_ratio=2, seed=0)
w.b1 = zeros(4)
transformer_block(zeros(3, 4), w)
