# warmup_schedule.ml: the learning-rate schedule of the original Transformer (noam_lr).
#
#     lr(step) = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
#
# It rises linearly for `warmup` steps, peaks where the two terms meet, then decays as one
# over the square root of the step. Prints the rate at some steps and plots three settings,
# with cosine_lr for comparison.
#
#     tapeml examples/warmup_schedule.ml [plot=PATH.png|none]

d_model = 512
warmup = 4000
peak = noam_lr(warmup, d_model, warmup)
print("noam_lr with d_model {d_model}, warmup {warmup}:")
for step in [1, 1000, 2000, 4000, 8000, 12000, 16000, 20000]
    lr = noam_lr(step, d_model, warmup)
    print("  step {step}: {lr}  ({round(100 * lr / peak, 2)}% of the peak)")
end
print("the peak is at step {warmup}; four times the steps (16000) halves it: {round(noam_lr(16000, d_model, warmup) / peak, 6)}")

png = script_arg("plot", "warmup_schedule.png")
if png != "none"
    steps = 1:100:30001
    fn curve(d, w)
        out = zeros(len(steps))
        for i in 0:len(steps) - 1
            out[i] = noam_lr(steps[i], d, w)
        end
        return out
    end
    cosine = zeros(len(steps))
    for i in 0:len(steps) - 1
        cosine[i] = cosine_lr(steps[i], 30000, peak, 0, warmup = warmup)
    end
    figure()
    plot(steps, curve(512, 4000), label = "noam, d_model 512, warmup 4000")
    plot(steps, curve(512, 8000), label = "noam, d_model 512, warmup 8000")
    plot(steps, curve(1024, 4000), label = "noam, d_model 1024, warmup 4000")
    plot(steps, cosine, label = "cosine_lr, warmup 4000, same peak")
    xlabel("step")
    ylabel("learning rate")
    title("Warmup schedules")
    legend()
    savefig(png)
end
