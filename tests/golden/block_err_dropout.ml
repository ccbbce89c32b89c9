# exit: 1
# dropout must satisfy 0 <= dropout < 1
w = transformer_block_init(4, 2, seed=0)
x = randn(3, 4)
transformer_block(x, w, dropout=1, training=true)
