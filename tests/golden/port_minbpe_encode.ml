# Port of minbpe's BasicTokenizer: train 3 merges on a text (get_stats, merge), then encode a new
# text as minbpe does: while two or more ids, merge the pair with the lowest merge index
# (min(stats, key=lambda p: merges.get(p, float("inf")))), until no pair is mergeable.
# Expected values: tests/reference/make_port_reference.py (plain Python, minbpe's code).
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
ids = char_codes("the cat sat on the mat with the hat")
merges = {:}
for k in 0:2
    stats = get_stats(ids)
    pair = keys(stats)[argmax(values(stats))]      # max(stats, key=stats.get): the first at ties
    merges[pair] = 256 + k
    ids = merge(ids, pair, 256 + k)
end
print(merges)
fn encode(text)
    ids = char_codes(text)
    while len(ids) >= 2
        stats = get_stats(ids)
        best = 1 / 0
        pair = none
        for p in keys(stats)
            if get(merges, p, 1 / 0) < best
                best = merges[p]
                pair = p
            end
        end
        if pair == none
            break
        end
        ids = merge(ids, pair, merges[pair])
    end
    return ids
end
print(encode("that hat"))
print(len(encode("the theme")), len(char_codes("the theme")))
