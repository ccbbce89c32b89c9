# Dictionaries (issue 29): a port of minbpe's get_stats and merge, then the dictionary's rules.
# The expected values in dictionaries.out were computed with Python's dict (see the comments).
fn get_stats(ids)
    counts = {:}
    for pair in zip(ids[0:end-1], ids[1:end])
        counts[pair] = get(counts, pair, 0) + 1
    end
    return counts
end

fn merge(ids, pair, idx)
    out = ()
    i = 0
    while i < len(ids)
        if i < len(ids) - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]
            out = out + (idx,)
            i += 2
        else
            out = out + (ids[i],)
            i += 1
        end
    end
    return vector(out)
end

ids = char_codes("aaabdaaabac")
merges = {:}
for k in 0:2
    stats = get_stats(ids)
    pair = keys(stats)[argmax(values(stats))]      # Python: max(stats, key=stats.get)
    merges[pair] = 256 + k
    ids = merge(ids, pair, 256 + k)
    print(k, pair, stats[pair], ids)
end
print(merges)
print(len(merges), contains(merges, (97, 97)), contains(merges, (1, 2)))

# insertion order, a key set twice keeps its place, several indices are one tuple key
d = {"b": 1, "a": 2, "b": 3}
d["c"] = 4
d["a"] += 10
d[1, 2] = "pair"
print(d, keys(d), values(d))
print(d[(1, 2)], d[1, 2], get(d, "zz", -1))
for k, v in items(d)
    print(k, "->", v)
end

# a value like every other: assignment copies
e = d
e["b"] = 100
print(d["b"], e["b"], d == e, remove(e, "b") == remove(d, "b"))
# numbers are keys by value; order does not matter to ==
print({1: "x"} == {1.0: "x"}, {"p": 1, "q": 2} == {"q": 2, "p": 1}, {:} == dict(), type({:}))
# nested dictionaries, set through both levels
cfg = {"gpt2": {"n_layer": 12}, "gpt2-medium": {"n_layer": 24}}
cfg["gpt2"]["n_layer"] += 1
print(cfg, cfg["gpt2-medium"]["n_layer"])
# a, b = v unpacks a vector; a tuple indexed by a vector picks items
lo, hi = [3, 9]
t = ("w", "x", "y", "z")
print(lo, hi, t[[0, 2]], t[[true, false, false, true]], sum(map(len, t)), max((lo, hi, 4)))
