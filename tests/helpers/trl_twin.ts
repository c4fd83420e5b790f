// TRL's objective on a case's logits through the float64 twins alone (src/oracle/): log-probs and entropies of
// every position, the loss mask (completion × tool), trl_loss_forward / backward and the gather backward —
// the independent chain the TRL golden tests and the step's gradient tests compare with.
import { parseTrlConfig, parseTrlRun } from '../../src/grpo/settings/trl.ts';
import { entropyThreshold } from '../../src/grpo/trainers/trl.ts';
import { resolveTrlParams } from '../../src/grpo/trainers/trl_params.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';
import { trl_loss_backward, trl_loss_forward } from '../../src/oracle/trl_loss.ts';

export function trlTwinChain(c: TrainerLossCase) {
  const config = parseTrlConfig(c.config).values;
  const N = c.B * c.T;
  const mask = Float64Array.from(c.completion_mask, (m, i) => m * (c.tool_mask ? c.tool_mask[i] : 1));
  const g = logprob_gather_forward(c.logits, c.completion_ids, null, N, c.V, config.temperature);
  const threshold = config.top_entropy_quantile < 1 ? entropyThreshold(Float32Array.from(g.entropy), mask, 1 - config.top_entropy_quantile) : null;
  const present = { B: c.B, T: c.T, ref: !!c.ref_per_token_logps, sampling: !!c.sampling_per_token_logps, localItems: mask.reduce((a, m) => a + m, 0) };
  const p = resolveTrlParams(config, parseTrlRun(c.run).values, present, threshold);
  const x = { logp: g.logp, entropy: g.entropy, old: c.old_per_token_logps, ref: c.ref_per_token_logps, sampling: c.sampling_per_token_logps, advantages: c.advantages, mask };
  const f = trl_loss_forward(x, p);
  const b = trl_loss_backward(x, f, p);
  // TRL scores (and back-propagates through) every position; the masks are in dlogp.
  const dlogits = logprob_gather_backward(c.logits, c.completion_ids, new Int32Array(N).fill(1), g.lse, b.dlogp, N, c.V, config.temperature, b.dentropy && { dentropy: b.dentropy, entropy: g.entropy });
  return { g, mask, f, dlogits };
}
