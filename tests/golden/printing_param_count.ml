print(6 * param_count(transformer_block_init(512, 8)) + 1024)
