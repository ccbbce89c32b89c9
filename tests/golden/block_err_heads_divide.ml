# exit: 1
# n_heads must divide d_model
w = transformer_block_init(32, 3)
