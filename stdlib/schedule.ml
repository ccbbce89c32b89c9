# Learning-rate schedules. Steps count from 1 (the first optimizer step is step 1).

# The Transformer's warmup schedule: linear rise for warmup steps, then 1/sqrt(step) decay.
# param step (number): the optimizer step, counted from 1 (values below 1 count as 1)
# param d_model (number): the model width, > 0
# param warmup (number): the number of warmup steps, > 0
# param scale (number): a factor on the whole schedule
# returns: number: the learning rate at step
# what: The learning rate of the original Transformer at a given optimizer step: it climbs linearly
#     for `warmup` steps, peaks, then decays as one over the square root of the step (four times the
#     steps, half the rate).
# how: scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al. 2017, eq. 3); steps
#     below 1 count as 1.
# error: TypeError when an argument is not a number
# error: ValueError when d_model or warmup is not positive
# example:
#     noam_lr(4000, 512, 4000)
# example:
#     noam_lr(16000, 512, 4000) / noam_lr(4000, 512, 4000)
fn noam_lr(step, d_model, warmup, scale = 1.0)
    if d_model <= 0 or warmup <= 0
        error("noam_lr(): d_model and warmup must be positive, got d_model = {d_model}, warmup = {warmup}")
    end
    s = max([step, 1])
    return scale * d_model ^ -0.5 * min([s ^ -0.5, s * warmup ^ -1.5])
end

# Linear warmup to lr_max, then a half cosine down to lr_min at step total.
# param step (number): the optimizer step (0 at the start)
# param total (number): the step at which the rate reaches lr_min, > 0
# param lr_max (number): the peak learning rate, reached at the end of warmup
# param lr_min (number): the final learning rate
# param warmup (number): the number of linear warmup steps (0: none; beyond total, the whole run
#     warms up)
# returns: number: the learning rate at step
# what: A learning rate that climbs linearly from 0 to lr_max over `warmup` steps, then follows half
#     a cosine wave down to lr_min at step total and stays there: large steps early, small ones to
#     settle at the end.
# how: step <= warmup: lr_max * step / warmup; after: lr_min + (lr_max - lr_min) (1 + cos(pi p)) / 2
#     with p = (step - warmup) / (total - warmup), capped at 1 (Loshchilov & Hutter 2017).
# error: TypeError when an argument is not a number
# error: ValueError when total is not a number > 0, or warmup not a number >= 0
# example:
#     cosine_lr(50, 100, 1e-3)
# example:
#     cosine_lr(5, 100, 1e-3, warmup = 10)
fn cosine_lr(step, total, lr_max, lr_min = 0, warmup = 0)
    if type(total) != "number" or type(warmup) != "number" or not (total > 0 and warmup >= 0)
        error("cosine_lr(): total must be a number > 0 and warmup a number >= 0, got total = {total}, warmup = {warmup}")
    end
    if warmup > 0 and step <= warmup
        return lr_max * max([step, 0]) / warmup
    end
    progress = min([(step - warmup) / max([total - warmup, 1]), 1])
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + cos(pi() * progress))
end
