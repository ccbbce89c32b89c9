# exit: 1
# transformer_block_init checks norm too
w = transformer_block_init(16, 2, norm="rmsnorm")
