# exit: 1
fn forever(n)
    return forever(n + 1)
end
forever(0)
