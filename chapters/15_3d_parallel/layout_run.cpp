// layout_run.cpp — one layout run end to end, silently (layout_run.h).
#include "layout_run.h"

#include "ch14.h"
#include "dpt/check.h"
#include "dpt/report.h"
#include "outputs.h"
#include "pipeline_grid.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

TpRun run_layout(Context& ctx, const Ch15Flags& f, const Corpus& text) {
  const Ch15Layout layout = ch15_layout(f, ctx.world);
  DPT_CHECK(layout.problem.empty(), layout.problem);
  Ch15Grid grid(ctx, layout.tp, layout.dp, layout.pp);
  Rng rng(f.lm.seed);
  Gpt full(f.lm.shape, Device::host(), rng);  // every rank: the same model from the same seed (or file)
  if (!f.lm.load_weights.empty()) load_ch14_weights(f.lm.load_weights, full, text);
  TensorParallelGpt model(grid.tp(), full, ctx.device, grid.pp_rank(), layout.pp);
  Ch14Flags quiet = f.lm;
  quiet.eval_batches = 0;  // no held-out evaluation inside the timed steps
  StepChart chart(f.chart, quiet.steps, /*verify=*/false, ctx);  // --slow-rank slows the layout run too
  return train_tensor_parallel_gpt(ctx, grid, model, text, quiet, f.sp, {layout.micro_batches, f.schedule},
                                   /*verify=*/false, Narrator(false), chart);
}

}  // namespace dpt::ch15
