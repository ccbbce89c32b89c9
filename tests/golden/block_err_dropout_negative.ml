# exit: 1
# dropout must satisfy 0 <= dropout < 1 (multi_head_attention too)
w = transformer_block_init(4, 2, seed=0)
x = randn(3, 4)
multi_head_attention(x, w.heads, 2, dropout=-0.1)
