# exit: 1
# a missing key is a KeyError at the key, naming the keys there are and a close one
vocab = {"the": 0, "cat": 1, "sat": 2}
fn lookup(word)
    return vocab[word]
end
print(lookup("cat"))
print(lookup("car"))
