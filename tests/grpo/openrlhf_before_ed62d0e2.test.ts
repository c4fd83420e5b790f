// OpenRLHF before ed62d0e2 (config openrlhf_code before-ed62d0e2, which the readers set for the old flat arg names):
// its training_step took every term as the micro-batch's masked_mean, with no loss_batch_info and no dp_size
// (ed62d0e2~1 openrlhf/models/loss.py PolicyLoss.forward, openrlhf/trainer/ray/ppo_actor.py training_step). The two
// loss cases of tests/fixtures/openrlhf_runs are float64 runs of that code with a run context of 2 processes × 2
// micro-batches and other tokens in the window, which 3c3be62 would normalise over and the old code ignores: the
// objective must give the old code's numbers (GPU kernels and the float64 twin). Where the old code's formula differs
// in the data (a gspo row without action tokens: 0/0), and for a loss case written with nested args or the old
// names, one line says why.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openrlhfLoss, openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import { testGpu } from '../helpers/gpu.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { checkTrainerOutputs, readTrainerCase } from '../helpers/trainer_case.ts';

const RUNS = join(import.meta.dirname, '..', 'fixtures', 'openrlhf_runs');
const CASES = ['old_ppo_kl_ent_window.safetensors', 'old_gspo_kl_window.safetensors'];

describe('OpenRLHF before ed62d0e2: the micro-batch masked_mean of every term', () => {
  for (const file of CASES) {
    it(`${file}: loss, per-token terms and dlogits match that code (GPU)`, async () => {
      const { st, c } = readTrainerCase(join(RUNS, file));
      expect(c.config.openrlhf_code).toBe('before-ed62d0e2');
      const r = await openrlhfLoss(await testGpu(), c, { backward: true });
      checkTrainerOutputs(file, st, c, r, 1, true);
    }, 120_000);
    it(`${file}: the float64 twin within 1% of the tolerances`, async () => {
      const { st, c } = readTrainerCase(join(RUNS, file));
      const r = await openrlhfObjective(twinBackend(c), c, { backward: true });
      for (const [k, v] of Object.entries(checkTrainerOutputs(file, st, c, r, 1, true))) expect(v, `${file} ${k}`).toBeLessThan(0.01);
    }, 120_000);
  }

  it('a gspo row without action tokens is refused (that code divides by action_mask.sum() unclamped)', async () => {
    const { c } = readTrainerCase(join(RUNS, 'old_gspo_kl_window.safetensors'));
    const mask = Int32Array.from(c.completion_mask);
    mask.fill(0, 2 * c.T, 3 * c.T);
    const e: TrainerLossCase = { ...c, completion_mask: mask };
    await expect(openrlhfObjective(twinBackend(e), e, { backward: false })).rejects.toThrow(/^config\.actor\.policy_loss_type: gspo with sample 2 holding no action token: OpenRLHF before ed62d0e2 .*without today's clamp\(min=1\)/);
  });

  it('a loss_batch_info given for that code is refused (it had none)', async () => {
    const { c } = readTrainerCase(join(RUNS, 'old_ppo_kl_ent_window.safetensors'));
    const e = { ...c, run: { loss_batch_info: { dp_size: 2, batch_num_tokens: 20, global_batch_size: 4 } } };
    await expect(openrlhfObjective(twinBackend(e), e, { backward: false })).rejects.toThrow(/^run\.loss_batch_info: given for a batch OpenRLHF before ed62d0e2 wrote/);
  });
});

describe('an OpenRLHF loss case takes flat dotted names', () => {
  const { c } = readTrainerCase(join(RUNS, 'old_ppo_kl_ent_window.safetensors'));
  const withConfig = (config: Record<string, unknown>): TrainerLossCase => ({ ...c, config, run: {} });
  it.each([
    ['nested args', { algo: { kl: { use_loss: true } } }, /^config\.algo: not an openrlhf setting the studio knows: an OpenRLHF loss case takes flat dotted names \(e\.g\. "algo\.kl\.use_loss"\), not nested objects$/],
    ['a name before ed62d0e2', { use_kl_loss: true }, /^config\.use_kl_loss: OpenRLHF's name before ed62d0e2 for algo\.kl\.use_loss; an OpenRLHF loss case takes today's flat dotted names/],
    ['an unknown name', { use_ms: false }, /^config\.use_ms: not an openrlhf setting the studio knows \(an OpenRLHF loss case takes train_ppo_ray\.py's flat dotted names/],
  ])('%s: one line saying so', async (_what, config, message) => {
    const e = withConfig(config);
    await expect(openrlhfObjective(twinBackend(e), e, { backward: false })).rejects.toThrow(message);
  });
});
