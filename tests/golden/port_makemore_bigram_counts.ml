# Port of makemore part 1: count the bigrams of the words into N (with '.' as start and end,
# id 0), smooth with N + 1, normalize rows, and take the average negative log likelihood.
# Expected values: tests/reference/make_port_reference.py (plain Python and NumPy).
words = ("emma", "olivia", "ava", "isabella")
codes = unique(char_codes(join(words, "")))
stoi = {:}
for i in 0:len(codes)-1
    stoi[codes[i]] = i + 1
end
V = len(codes) + 1
N = zeros(V, V)
for w in words
    ids = [0]
    for c in char_codes(w)
        ids = [ids, stoi[c]]
    end
    ids = [ids, 0]
    for j in 0:len(ids)-2
        N[ids[j], ids[j+1]] += 1
    end
end
print(N[0, :])
print(sum(N))
P = (N + 1) / sum(N + 1, dim=1, keepdims=true)
print(round(P[0, :], 4))
nll = 0
n = 0
for w in words
    ids = [0]
    for c in char_codes(w)
        ids = [ids, stoi[c]]
    end
    ids = [ids, 0]
    for j in 0:len(ids)-2
        nll -= log(P[ids[j], ids[j+1]])
        n += 1
    end
end
print(n, round(nll / n, 6))
