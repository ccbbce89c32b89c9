# exit: 1
# an unknown norm lists the allowed values
w = transformer_block_init(4, 2, seed=0)
x = randn(3, 4)
transformer_block(x, w, norm="batch_norm")
