# Port of the Annotated Transformer's PositionalEncoding buffer: div_term =
# exp(arange(0, d, 2) * -(log(10000) / d)), pe[:, 0::2] = sin(position * div_term),
# pe[:, 1::2] = cos(position * div_term); then the same from sinusoidal_positions.
# Expected values: tests/reference/make_port_reference.py (NumPy).
max_len = 6
d_model = 8
position = reshape(0:max_len-1, max_len, 1)                    # arange(0, max_len).unsqueeze(1)
div_term = exp((0:2:d_model-1) * -(log(10000) / d_model))
pe = zeros(max_len, d_model)
pe[:, 0:2:d_model-1] = sin(position * div_term)
pe[:, 1:2:d_model-1] = cos(position * div_term)
print(round(pe[[1, end], :], 4))
print(max(abs(pe - sinusoidal_positions(max_len, d_model))) < 1e-12)
x = zeros(2, max_len, d_model) + 0.5
print(round(sum(x + pe[0:max_len-1, :], dim=2)[1, :], 4))     # x + self.pe[:, : x.size(1)]
