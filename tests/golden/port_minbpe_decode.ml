# Port of minbpe's decode: vocab[idx] = vocab[p0] + vocab[p1] for each merge in order, then the
# ids' pieces joined. Text stands in for bytes (ASCII only). Expected values:
# tests/reference/make_port_reference.py (plain Python, minbpe's code with bytes).
merges = {(104, 101): 256, (256, 32): 257, (116, 257): 258, (97, 116): 259}
vocab = {:}
for idx in 32:126
    vocab[idx] = from_char_codes([idx])
end
for pair, idx in items(merges)
    vocab[idx] = vocab[pair[0]] + vocab[pair[1]]
end
print(vocab[257], vocab[258], len(vocab))
ids = [258, 99, 259, 32, 115, 259]
pieces = ()
for i in ids
    pieces = pieces + (vocab[i],)
end
print(join(pieces, ""))
print(join(map(fn(i) -> vocab[i], [256, 259]), "|"))
