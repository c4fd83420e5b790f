// End-to-end gradient check of the verl and OpenRLHF objectives on the float64 twin chain: dlogits against
// central differences of the loss in the raw logits (temperature, entropy bonus, KL and the policy term
// together), on settings no golden case combines — verl with temperature 0.8 and an entropy bonus, OpenRLHF
// gspo with its row-coupled ratio, KL k2 and an entropy bonus. Off-policy cases only: on-policy old
// log-probs are the detached current ones, which a finite difference would move too.
import { describe, it } from 'vitest';
import path from 'node:path';
import { expectClose } from '../helpers/close.ts';
import { readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { Rng } from '../../src/model/rng.ts';
import { verlObjective } from '../../src/grpo/trainers/verl.ts';
import { openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import type { TrainerLossCase, TrainerLossOutputs } from '../../src/grpo/trainers/types.ts';

type Objective = (c: TrainerLossCase) => Promise<TrainerLossOutputs>;

async function gradcheck(c0: TrainerLossCase, objective: Objective, label: string): Promise<void> {
  // float64 logits, so the difference quotient is not limited by float32 rounding of logits ± h
  const logits = Float64Array.from(c0.logits);
  const c = { ...c0, logits: logits as unknown as Float32Array };
  const dlogits = (await objective(c)).dlogits!;
  const rng = new Rng(7);
  const picks = Array.from({ length: 24 }, (_, k) => {
    const n = rng.int(0, c.B * c.T - 1);
    return n * c.V + (k % 3 === 0 ? c.completion_ids[n] : rng.int(0, c.V - 1)); // targets and others
  });
  const h = 1e-5;
  const fd: number[] = [];
  for (const i of picks) {
    const x = logits[i];
    logits[i] = x + h;
    const up = (await objective(c)).loss;
    logits[i] = x - h;
    const down = (await objective(c)).loss;
    logits[i] = x;
    fd.push((up - down) / (2 * h));
  }
  expectClose(picks.map((i) => dlogits[i]), fd, { rtol: 1e-5, atol: 1e-9, label });
}

describe('objective gradients by central differences (float64 twin chain)', () => {
  it('verl: vanilla, abs KL, temperature 0.8, entropy_coeff 0.01, seq-mean-token-sum-norm', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl', 'case_03.safetensors'));
    const cc = { ...c, config: { ...c.config, entropy_coeff: 0.01 } };
    await gradcheck(cc, (x) => verlObjective(twinBackend(x), { ...x, config: cc.config }, { backward: true }), 'verl case_03 + entropy');
  });
  it('verl: geo_mean with sequence rollout IS', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl', 'case_07.safetensors'));
    await gradcheck(c, (x) => verlObjective(twinBackend(x), x, { backward: true }), 'verl case_07');
  });
  it('OpenRLHF: gspo, KL k2, entropy_coef 0.01', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'openrlhf', 'case_02.safetensors'));
    await gradcheck(c, (x) => openrlhfObjective(twinBackend(x), x, { backward: true }), 'openrlhf case_02');
  });
  it('OpenRLHF: ppo, dual clip, KL k1, temperature 0.9, two ranks', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'openrlhf', 'case_01.safetensors'));
    await gradcheck(c, (x) => openrlhfObjective(twinBackend(x), x, { backward: true }), 'openrlhf case_01');
  });
});
