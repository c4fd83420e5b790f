// The float64 twin chain of the verl / OpenRLHF objectives: a PpoBackend on src/oracle's logprob_gather and
// ppo_loss (the oracles of the kernels), so a trainer module's decisions can be checked against the golden
// cases without float32 in the way.
import type { PpoBackend } from '../../src/grpo/trainers/ppo_run.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import * as gather from '../../src/oracle/logprob_gather.ts';
import * as ppo from '../../src/oracle/ppo_loss.ts';

export function twinBackend(c: TrainerLossCase): PpoBackend {
  const N = c.B * c.T;
  let fwd: gather.LogprobGather | null = null;
  let entropy: Float64Array = new Float64Array(N);
  let temperature = 1;
  return {
    async logprobs(t, entropyT) {
      temperature = t;
      fwd = gather.logprob_gather_forward(c.logits, c.completion_ids, c.completion_mask, N, c.V, t);
      entropy = entropyT === t ? fwd.entropy : gather.logprob_gather_forward(c.logits, c.completion_ids, c.completion_mask, N, c.V, entropyT).entropy;
      return { logp: fwd.logp, entropy };
    },
    async objective(plan, backward) {
      const f = fwd!;
      const o = ppo.ppo_loss_forward(f.logp, entropy, plan.inputs, c.B, c.T, plan.params);
      const dent = plan.params.ent_coef !== 0 ? { dentropy: o.dentropy, entropy } : null;
      const dlogits = backward ? gather.logprob_gather_backward(c.logits, c.completion_ids, c.completion_mask, f.lse, o.dlogp, N, c.V, temperature, dent) : null;
      return { out: o, dlogits };
    },
  };
}
