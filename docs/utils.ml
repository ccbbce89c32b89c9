# A small module for the import example of docs/language.md.
fn double(x)
    return 2 * x
end
greeting = "hello from utils.ml"
