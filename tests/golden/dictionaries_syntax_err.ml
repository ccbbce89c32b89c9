# exit: 1
# a record's '=' after a dictionary's first key: the first item decides which it is
d = {"lr": 0.1, steps = 100}
