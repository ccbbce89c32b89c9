# Port of nanoGPT's GPT.generate: crop the context to block_size, take the last position's
# logits, pick the next id, append; greedy (temperature 0) so the answer is exact. Then its
# top-k step: logits[logits < v[:, [-1]]] = -inf. Expected values: tests/reference/make_port_reference.py.
V = 5
block_size = 3
W = sin(reshape(0:V*V-1, V, V))
pos = cos(reshape(0:block_size*V-1, block_size, V)) / 2
fn logits_of(p, ids)
    return p.W[ids, :] + p.pos[0:len(ids)-1, :]
end
ids = generate(logits_of, {W = W, pos = pos}, [1], 8, temperature=0, context=block_size)
print(ids)
z = [0.3, 2.5, -1, 1.7, 0.9]
v = topk(z, 3)[0]
print(where(z < v[end], -1/0, z))
print(top_k_filter(z, 3))
