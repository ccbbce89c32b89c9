# exit: 1
# a missing field names the path and what the record needs
w = transformer_block_init(4, 2, seed=0)
bad = {heads = w.heads, ln1_gamma = w.ln1_gamma, ln1_beta = w.ln1_beta, b1 = w.b1, w2 = w.w2, b2 = w.b2,
       ln2_gamma = w.ln2_gamma, ln2_beta = w.ln2_beta}
transformer_block(zeros(2, 3, 4), bad)
