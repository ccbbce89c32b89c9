# exit: 1
# an rms_norm block has no norm bias
w = transformer_block_init(4, 2, seed=0)
transformer_block(zeros(3, 4), w, norm="rms_norm")
