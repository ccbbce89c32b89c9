# Learning-rate schedules. Steps count from 1 (the first optimizer step is step 1).

# The warmup schedule of "Attention Is All You Need" (Vaswani et al. 2017, eq. 3):
# d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), a linear rise for `warmup` steps, then
# decay as 1/sqrt(step). Steps below 1 count as 1.
fn noam_lr(step, d_model, warmup, scale = 1.0)
    if d_model <= 0 or warmup <= 0
        error("noam_lr(): d_model and warmup must be positive, got d_model = {d_model}, warmup = {warmup}")
    end
    s = max([step, 1])
    return scale * d_model ^ -0.5 * min([s ^ -0.5, s * warmup ^ -1.5])
end

# Linear warmup from 0 to lr_max over `warmup` steps, then half a cosine from lr_max down to
# lr_min at step `total` (Loshchilov & Hutter 2017, SGDR, without restarts); lr_min after it.
fn cosine_lr(step, total, lr_max, lr_min = 0, warmup = 0)
    if warmup > 0 and step <= warmup
        return lr_max * max([step, 0]) / warmup
    end
    progress = min([(step - warmup) / max([total - warmup, 1]), 1])
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + cos(pi() * progress))
end
