# A character-level tokenizer. The vocabulary is a string holding each distinct character
# once, in code-point order; a character's id is its 0-based position in that string.

# The vocabulary of a text: its distinct characters, sorted by code point.
fn char_vocab(text)
    return from_char_codes(unique(char_codes(text)))
end

# The ids of the characters of text (a vector; ids are 0-based positions in vocab).
fn encode(vocab, text)
    codes = char_codes(text)
    if len(codes) == 0
        return zeros(0)
    end
    vcodes = char_codes(vocab)
    if len(unique(vcodes)) != len(vcodes)
        error("encode(): the vocabulary has a repeated character; it holds each character once (char_vocab(text) makes one) and comes first: encode(vocab, text)")
    end
    lookup = fill(-1, max([max(vcodes), max(codes)]) + 1)
    lookup[vcodes] = range(len(vcodes))
    ids = lookup[codes]
    if any(ids < 0)
        missing = from_char_codes(codes[ids < 0][0])
        error("encode(): the character \"{missing}\" is not in the vocabulary")
    end
    return ids
end

# The text that a vector of ids (or one id) stands for.
fn decode(vocab, ids)
    return from_char_codes(char_codes(vocab)[ids])
end

# The value of a "name=value" script argument (from ARGS), or default when it is not given.
fn script_arg(name, default)
    if type(name) != "string"
        error("script_arg(): name is the option's name as a string, such as \"steps\"; got a {type(name)}")
    end
    prefix = name + "="
    n = len(prefix)
    for a in ARGS
        if len(a) > n and a[0:n - 1] == prefix
            return a[n:end]
        end
    end
    return default
end
