# pre_vs_post_ln.ml: where the layer norm sits changes the gradient that reaches the top block.
#
# For stacks of 2, 4, 8 and 12 blocks at initialisation, compute the gradient of a
# next-token loss and report the norm of the gradient of the LAST block's weights, once with
# Post-LN blocks (layer_norm after each residual add, the 2017 layout) and once with Pre-LN
# blocks (layer_norm before each sublayer, plus one final layer_norm). Xiong et al. (2020,
# "On Layer Normalization in the Transformer Architecture") predict that Post-LN's top gradient
# stays large whatever the depth, while Pre-LN's shrinks as blocks are added (the final
# layer_norm divides it by the growing scale of the residual stream).
#
#     tapeml examples/pre_vs_post_ln.ml [plot=PATH.png|none] [trials=N]

seed(0)
d_model = 32
n_heads = 4
T = 16                       # tokens per sequence
V = 40                       # vocabulary size
depths = [2, 4, 8, 12]
trials = num(script_arg("trials", "3"))   # random initialisations averaged per depth

fn make_stack(n)
    blocks = ()
    for i in 1:n
        blocks = append(blocks, transformer_block_init(d_model, n_heads))
    end
    return blocks
end

# Next-token loss of a stack on inputs x (T x d_model); Pre-LN ends with one final layer_norm.
fn stack_loss(blocks, x, w_out, targets, pre_ln)
    h = x
    for b in blocks
        h = transformer_block(h, b, norm_first = pre_ln, causal = true)
    end
    if pre_ln
        h = layer_norm(h, ones(d_model), zeros(d_model))
    end
    return cross_entropy(h @ w_out, targets)
end

# Norm of the gradient of the last block's weights (every matrix and vector of that block).
fn top_grad_norm(blocks, x, w_out, targets, pre_ln)
    g = grad(fn(bl) -> stack_loss(bl, x, w_out, targets, pre_ln), blocks)
    return grad_norm(g[len(blocks) - 1])
end

fn pad(s, width)
    return s + " " * max([width - len(s), 0])
end

post = zeros(len(depths))
pre = zeros(len(depths))
for i in 0:len(depths) - 1
    n = depths[i]
    for t in 1:trials
        blocks = make_stack(n)                  # the same weights for both layouts
        x = randn(T, d_model)
        w_out = randn(d_model, V) / sqrt(d_model)
        targets = randint(0, V, T)
        post[i] = post[i] + top_grad_norm(blocks, x, w_out, targets, false) / trials
        pre[i] = pre[i] + top_grad_norm(blocks, x, w_out, targets, true) / trials
    end
end

print("gradient norm of the last block's weights at initialisation")
print("(d_model {d_model}, {n_heads} heads, {T} tokens, mean of {trials} initialisations)")
print("")
print(pad("blocks", 8) + pad("Post-LN", 12) + pad("Pre-LN", 12) + "Post / Pre")
for i in 0:len(depths) - 1
    print(pad(str(depths[i]), 8) + pad(str(round(post[i], 4)), 12) + pad(str(round(pre[i], 4)), 12)
          + str(round(post[i] / pre[i], 2)))
end
print("")
print("Post-LN from 2 to 12 blocks: x{round(post[end] / post[0], 2)}; Pre-LN: x{round(pre[end] / pre[0], 2)}")
print("Pre-LN's top gradient shrinks with depth: {all(pre[1:end] < pre[0:end - 1])}")
print("Post-LN's top gradient is larger at every depth: {all(post > pre)}")

png = script_arg("plot", "pre_vs_post_ln.png")
if png != "none"
    figure()
    plot(depths, post, label = "Post-LN")
    plot(depths, pre, label = "Pre-LN")
    xlabel("blocks in the stack")
    ylabel("gradient norm of the last block")
    title("Top-block gradient at initialisation")
    legend()
    savefig(png)
end
