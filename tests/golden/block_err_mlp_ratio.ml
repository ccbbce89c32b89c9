# exit: 1
# mlp_ratio must be at least 1
w = transformer_block_init(16, 2, mlp_ratio=0)
