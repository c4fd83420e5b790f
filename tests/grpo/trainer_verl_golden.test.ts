// verl's objective (src/grpo/trainers/verl.ts on the GPU) against every verl loss case of
// tests/golden/trainers (float64 runs of verl's own code at b178a3c), with the README's tolerances; the
// float64 twin chain (tests/helpers/ppo_twin.ts) must use under 1% of them.
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { checkTrainerOutputs, readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { verlLoss, verlObjective } from '../../src/grpo/trainers/verl.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';

const DIR = path.join(TRAINER_GOLDEN, 'verl');
const CASES = readdirSync(DIR).filter((f) => /^case_\d+\.safetensors$/.test(f)).sort();
const worst: Record<string, number> = {};
afterAll(() => console.log('verl: worst fraction of the golden tolerance per output:\n' + Object.entries(worst).map(([k, v]) => `  ${k.padEnd(26)} ${v.toFixed(4)}`).join('\n')));

describe('verl golden loss cases', () => {
  it('are all there', () => expect(CASES.length).toBe(15));
  for (const file of CASES) {
    it(`${file}: loss, per-token terms, masks and dlogits match verl`, async () => {
      const gpu = await testGpu();
      const { st, c } = readTrainerCase(path.join(DIR, file));
      const r = await verlLoss(gpu, c, { backward: true });
      const w = checkTrainerOutputs(file, st, c, r, Number(c.config.temperature ?? 1), false);
      for (const [k, v] of Object.entries(w)) worst[k] = Math.max(worst[k] ?? 0, v);
    }, 120_000);
    it(`${file}: the float64 twin chain matches within 1% of the tolerances`, async () => {
      const { st, c } = readTrainerCase(path.join(DIR, file));
      const r = await verlObjective(twinBackend(c), c, { backward: true });
      const w = checkTrainerOutputs(file, st, c, r, Number(c.config.temperature ?? 1), false);
      for (const [k, v] of Object.entries(w)) expect(v, `${file} ${k}: fraction of the tolerance`).toBeLessThan(0.01);
    }, 120_000);
  }
});
