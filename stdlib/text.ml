# A character-level tokenizer. The vocabulary is a string holding each distinct character
# once, in code-point order; a character's id is its 0-based position in that string.

# The distinct characters of a text in code-point order, as a string (the vocabulary).
# param text (string): the training text
# returns: string: each distinct character of text once, in code-point order
# what: The vocabulary of a character-level model: every distinct character of the training text
#     once, sorted by code point; len(vocab) is the number of ids V.
# how: from_char_codes(unique(char_codes(text))); a character's id is its 0-based position in this
#     string, so len(vocab) is the vocabulary size.
# error: TypeError when text is not a string
# example:
#     char_vocab("hello world")
fn char_vocab(text)
    return from_char_codes(unique(char_codes(text)))
end

# The 0-based ids of a text's characters, as a vector.
# param vocab (string): the vocabulary: each character once (char_vocab(text) makes one)
# param text (string): the text to turn into ids
# returns: vector [len(text)] of 0-based ids
# what: Turns text into the token ids a character-level model reads: each character becomes its
#     0-based position in vocab. An empty text gives an empty vector.
# how: A lookup table from code point to position in vocab, indexed by char_codes(text).
# error: ValueError naming a character that is not in the vocabulary
# error: ValueError when vocab repeats a character (often vocab and text swapped)
# error: TypeError when vocab or text is not a string
# example:
#     v = char_vocab("hello world")
#     encode(v, "low")
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

# The text a vector of ids (or one id) stands for.
# param vocab (string): the vocabulary the ids index (0-based)
# param ids (array, [T] or a number): a vector of token ids, or one id
# returns: string
# what: Turns token ids back into text, each id picking its character from vocab: decode(v,
#     encode(v, s)) is s.
# how: from_char_codes(char_codes(vocab)[ids]); the inverse of encode.
# error: IndexError when an id is outside 0..len(vocab)-1 or not a whole number
# example:
#     v = char_vocab("hello world")
#     decode(v, encode(v, "hello"))
fn decode(vocab, ids)
    return from_char_codes(char_codes(vocab)[ids])
end

# The value of a name=value script argument, or default.
# param name (string): the option's name, as in name=value after the script's name
# param default (string): what to return when the option is not given (a string, like the values)
# returns: string: the option's value, or default
# what: Reads options given after the script name: `tapeml train.ml steps=30` makes
#     script_arg("steps", "1000") return "30". The value is a string; num(...) turns it into a
#     number.
# how: Scans ARGS (the tuple of strings after the script name, filled in by the command line;
#     assigning ARGS in a script does not change what script_arg reads) for the first item that
#     starts with name=, and returns the rest of it (an empty string for a bare `name=`).
# error: ValueError when name is not a string
# example:
#     # run as `tapeml this.ml`, without steps=...: the default
#     num(script_arg("steps", "1000")) + 1
# example:
#     ARGS    # the arguments after the script's name (set by the command line)
fn script_arg(name, default)
    if type(name) != "string"
        error("script_arg(): name is the option's name as a string, such as \"steps\"; got a {type(name)}")
    end
    prefix = name + "="
    n = len(prefix)
    for a in ARGS
        if len(a) >= n and a[0:n - 1] == prefix
            return a[n:end]
        end
    end
    return default
end
