# exit: 1
# eps must be positive
w = transformer_block_init(4, 2, seed=0)
x = randn(3, 4)
transformer_block(x, w, eps=0)
