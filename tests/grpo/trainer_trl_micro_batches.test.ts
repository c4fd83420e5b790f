// A TRL generation batch stepped as GRPOTrainer does (src/grpo/trainers/micro_batches.ts): shuffled, split into
// steps_per_generation micro-batches, one num_items_in_batch for all. Checked against the trl goldens: dapo's
// sum of micro-batch losses and its accumulated dlogits equal the one-pass values (its normaliser is global);
// grpo over k equal micro-batches with gradient_accumulation_steps = k equals one pass with 1; bnpo normalises
// per micro-batch, which the golden per-token losses give by hand.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose } from '../helpers/close.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { readTrainerCase } from '../../src/cli/trainer_case.ts';
import { trlGenerationStep } from '../../src/grpo/trainers/micro_batches.ts';

function load(name: string) {
  const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(GOLDEN_ROOT, 'trainers', 'trl', name))), name);
  return { st, c: readTrainerCase(st, name) };
}
const gmax = (a: Float64Array) => a.reduce((m, x) => Math.max(m, Math.abs(x)), 0);

describe('TRL generation batch in micro-batches', () => {
  it('dapo (case_03): Σ micro-batch losses and the accumulated dlogits equal the one-pass golden', async () => {
    const { st, c } = load('case_03.safetensors');
    const r = await trlGenerationStep(await testGpu(), c, { steps_per_generation: 2, order: [2, 0, 3, 1], backward: true });
    expect(r.micro.map((m) => m.rows)).toEqual([[2, 0], [3, 1]]);
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: 'loss' });
    const dl = toF64(st, 'dlogits');
    expectClose(r.dlogits!, dl, { rtol: 1e-4, atol: 1e-5 * gmax(dl), label: 'dlogits' });
  });

  it('grpo (case_00): 3 micro-batches with gradient_accumulation_steps 3 equal one pass with 1', async () => {
    const { st, c } = load('case_00.safetensors');
    const r = await trlGenerationStep(await testGpu(), { ...c, run: { ...c.run, gradient_accumulation_steps: 3 } }, { steps_per_generation: 3, order: [1, 2, 0], backward: true });
    expect(r.micro).toHaveLength(3);
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: 'loss' });
    const dl = toF64(st, 'dlogits');
    expectClose(r.dlogits!, dl, { rtol: 1e-4, atol: 1e-5 * gmax(dl), label: 'dlogits' });
  });

  it('bnpo (case_01): each micro-batch divides by its own token count', async () => {
    const { st, c } = load('case_01.safetensors');
    const gas = 2;
    const r = await trlGenerationStep(await testGpu(), { ...c, run: { ...c.run, gradient_accumulation_steps: gas } }, { steps_per_generation: 2, order: [0, 3, 1, 2], backward: false });
    const L = toF64(st, 'per_token_loss');
    const M = toF64(st, 'loss_mask');
    const T = c.T;
    const expected = [[0, 3], [1, 2]].map((rows) => {
      let s = 0;
      let n = 0;
      for (const b of rows) for (let t = 0; t < T; t++) (s += L[b * T + t] * M[b * T + t]), (n += M[b * T + t]);
      return s / Math.max(1, n) / gas;
    });
    expectClose(r.micro.map((m) => m.outputs.loss), expected, { rtol: 1e-4, atol: 1e-6, label: 'micro-batch losses' });
    expect(r.dlogits).toBeNull();
  });

  it('bad splits name the field', async () => {
    const { c } = load('case_00.safetensors');
    const gpu = await testGpu();
    await expect(trlGenerationStep(gpu, c, { steps_per_generation: 2, backward: false })).rejects.toThrow(/run\.steps_per_generation: 2 must be a positive integer dividing the generation batch \(3 rows\)/);
    await expect(trlGenerationStep(gpu, c, { steps_per_generation: 3, order: [0, 0, 1], backward: false })).rejects.toThrow(/order: expected a permutation of the 3 rows/);
    await expect(trlGenerationStep(gpu, { ...c, run: { num_processes: 2 } }, { steps_per_generation: 1, backward: false })).rejects.toThrow(/run\.num_items_in_batch: needed with num_processes > 1/);
  });
});
