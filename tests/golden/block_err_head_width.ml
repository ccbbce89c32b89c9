# exit: 1
# a head of the wrong width: the path and both shapes
seed(0)
h0 = {wq = randn(4, 2), wk = randn(4, 2), wv = randn(4, 2), wo = randn(2, 4)}
h1 = {wq = randn(4, 3), wk = randn(4, 2), wv = randn(4, 2), wo = randn(2, 4)}
w = transformer_block_init(4, 2, seed=0)
w.heads = (h0, h1)
transformer_block(randn(3, 4), w)
