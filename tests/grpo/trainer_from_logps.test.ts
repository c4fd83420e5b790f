// The trainer objectives on log-probs already scored (src/grpo/trainers/from_logps.ts: what the studio's loss
// stage, what-if and loss table run) against every tests/golden/trainers case: the case's own float64
// per_token_logps / per_token_entropy go in as the "forward's", and the loss, per-token loss, KL, IS ratio
// and masks must match the golden outputs within the README tolerances; the per-token gradient it returns
// (dlogp, dentropy) through the float64 twin of the gather backward must give the golden dlogits. The loss table's column for the
// case's own loss type must give the golden loss too.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { statsSince } from '../../src/gpu/context.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose } from '../helpers/close.ts';
import { parseSafeTensors, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import { readTrainerCase } from '../../src/cli/trainer_case.ts';
import { lossColumns, lossTable, trainerLossFromLogps } from '../../src/grpo/trainers/from_logps.ts';
import type { ScoredLogps, TrainerLossCase } from '../../src/grpo/trainers/types.ts';
import { TRL_LOSS_TYPES } from '../../src/kernels/types.ts';
import { logprob_gather_backward as ref_gather_backward, logprob_gather_forward as ref_gather_forward } from '../../src/oracle/logprob_gather.ts';

const TRAINERS = ['trl', 'verl', 'openrlhf'] as const;
const COMPARED = ['per_token_kl', 'importance_sampling_ratio', 'per_token_loss'] as const;
const MASKS = ['loss_mask', 'entropy_mask', 'off_policy_mask'] as const;

function load(trainer: string, file: string): { st: SafeTensors; c: TrainerLossCase } {
  const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(GOLDEN_ROOT, 'trainers', trainer, file))), file);
  return { st, c: readTrainerCase(st, file) };
}

/** The trainer's temperature setting for the case, as each objective reads it. */
function temperatureOf(c: TrainerLossCase): number {
  const t = c.trainer === 'openrlhf' ? c.config['rollout.temperature'] : c.config.temperature;
  return typeof t === 'number' ? t : 1;
}

/** The golden log-probs and entropies, as a forward at the trainer's temperature would have scored them. */
function scoredOf(st: SafeTensors, c: TrainerLossCase): ScoredLogps {
  const N = c.B * c.T;
  const f32 = (n: string) => (st.tensors.has(n) ? Float32Array.from(toF64(st, n)) : new Float32Array(N));
  return { per_token_logps: f32('per_token_logps'), per_token_entropy: f32('per_token_entropy'), temperature: temperatureOf(c) };
}

/** OpenRLHF takes its entropy of the untempered logits: one forward at another temperature cannot give both. */
const needsSecondForward = (c: TrainerLossCase) => c.trainer === 'openrlhf' && c.config['actor.entropy_coef'] != null && temperatureOf(c) !== 1;

for (const trainer of TRAINERS) {
  const cases = readdirSync(path.join(GOLDEN_ROOT, 'trainers', trainer)).filter((f) => /^case_\d+\.safetensors$/.test(f)).sort();
  describe(`${trainer} objective from scored log-probs`, () => {
    it('has golden cases', () => expect(cases.length).toBeGreaterThan(5));
    for (const file of cases) {
      it(`${file}: loss and per-token terms match the golden`, async () => {
        const gpu = await testGpu();
        const { st, c } = load(trainer, file);
        const { logits: _l, V: _v, ...inputs } = c;
        const scored = scoredOf(st, c);
        if (needsSecondForward(c)) {
          await expect(trainerLossFromLogps(gpu, inputs, scored)).rejects.toThrow(/rollout\.temperature/);
          return;
        }
        const r = await trainerLossFromLogps(gpu, inputs, scored);
        expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${file} loss` });
        for (const name of COMPARED) {
          if (!st.tensors.has(name)) continue;
          expect(r[name], `${file}: ${name} not formed`).toBeTruthy();
          expectClose(r[name]!, toF64(st, name), { rtol: 1e-4, atol: 1e-5, mask: c.completion_mask, label: `${file} ${name}` });
        }
        for (const name of MASKS) if (st.tensors.has(name)) expect(Array.from(r[name]!), `${file} ${name}`).toEqual(Array.from(toF64(st, name)));
        // The per-token gradient (∂loss/∂logp, ∂loss/∂entropy) through the float64 twin of the gather backward
        // is the golden dlogits: TRL scores (and back-propagates through) every position, verl / OpenRLHF the mask.
        if (st.tensors.has('dlogits')) {
          const N = c.B * c.T;
          const g = ref_gather_forward(c.logits, c.completion_ids, null, N, c.V, scored.temperature);
          const mask = trainer === 'trl' ? new Int32Array(N).fill(1) : c.completion_mask;
          const dlogits = ref_gather_backward(c.logits, c.completion_ids, mask, g.lse, r.dlogp!, N, c.V, scored.temperature, { dentropy: r.dentropy!, entropy: g.entropy });
          const expected = toF64(st, 'dlogits');
          const gmax = expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
          expectClose(dlogits, expected, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${file} dlogits from dlogp` });
        }
      }, 60_000);
    }
  });
}

describe('loss table', () => {
  it('lists every loss type of each trainer, with a formula', () => {
    expect(lossColumns('trl').map((c) => c.label)).toEqual([...TRL_LOSS_TYPES]);
    expect(lossColumns('verl')).toHaveLength(8 * 4);
    expect(lossColumns('openrlhf').map((c) => c.label)).toEqual(['ppo', 'gspo']);
    for (const t of TRAINERS) for (const col of lossColumns(t)) expect(col.formula, `${t} ${col.label}`).toMatch(/\S{3}/);
  });

  it("the case's own loss type's column gives the golden loss (trl, verl)", async () => {
    const gpu = await testGpu();
    for (const [trainer, file] of [['trl', 'case_03.safetensors'], ['verl', 'case_02.safetensors']] as const) {
      const { st, c } = load(trainer, file);
      const { logits: _l, V: _v, ...inputs } = c;
      const cells = await lossTable(gpu, inputs, scoredOf(st, c));
      const own = trainer === 'trl' ? String(c.config.loss_type ?? 'dapo') : `${c.config.loss_mode ?? 'vanilla'} · ${c.config.loss_agg_mode ?? 'token-mean'}`;
      const cell = cells.find((x) => x.label === own)!;
      expect(cell, `${file}: column ${own}`).toBeTruthy();
      expectClose([cell.loss!], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${file} table ${own}` });
      // Other loss types give other numbers on the same completions (the table is not one value repeated).
      expect(new Set(cells.filter((x) => x.loss !== null).map((x) => x.loss!.toPrecision(6))).size).toBeGreaterThan(2);
    }
  }, 120_000);

  it('is one submit and one readback for every column, and each cell is what that loss type alone gives (refusals included)', async () => {
    const gpu = await testGpu();
    for (const [trainer, file] of [['trl', 'case_03.safetensors'], ['verl', 'case_02.safetensors'], ['openrlhf', 'case_00.safetensors']] as const) {
      const { st, c } = load(trainer, file);
      const { logits: _l, V: _v, ...inputs } = c;
      const scored = scoredOf(st, c);
      // A run context some columns refuse (TRL's dapo / cispo / vespo need num_items_in_batch on two processes):
      // their seats are released without reading while the others share the submit.
      const run = trainer === 'trl' ? { num_processes: 2, gradient_accumulation_steps: c.run.gradient_accumulation_steps } : c.run;
      const before = { ...gpu.stats };
      const cells = await lossTable(gpu, { ...inputs, run }, scored);
      const work = statsSince(gpu.stats, before);
      expect([work.submits, work.readbacks], `${trainer}: submits, readbacks`).toEqual([1, 1]);
      expect(cells.map((x) => x.label)).toEqual(lossColumns(trainer).map((x) => x.label));
      if (trainer === 'trl') expect(cells.filter((x) => x.error !== null).length, 'trl: refused columns').toBeGreaterThan(0);
      expect(cells.filter((x) => x.loss !== null).length, `${trainer}: computed columns`).toBeGreaterThan(1);
      for (const cell of cells) {
        const alone = trainerLossFromLogps(gpu, { ...inputs, run, config: { ...inputs.config, ...cell.patch } }, scored);
        if (cell.error !== null) await expect(alone, `${trainer} ${cell.label}`).rejects.toThrow(cell.error);
        else expect((await alone).loss, `${trainer} ${cell.label}`).toBe(cell.loss);
      }
      // A table whose buffers would pass the group budget runs in groups of what fits (here 5 columns), one
      // submit and readback each, with the same cells.
      const N = c.B * c.T;
      const before5 = { ...gpu.stats };
      const in5 = await lossTable(gpu, { ...inputs, run }, scored, { groupBytes: 96 * N * 5 + 95 });
      const work5 = statsSince(gpu.stats, before5);
      const groups = Math.ceil(cells.length / 5);
      expect([work5.submits, work5.readbacks], `${trainer}: submits, readbacks in groups of 5`).toEqual([groups, groups - emptyGroups(cells, 5)]);
      expect(in5).toEqual(cells);
    }
  }, 120_000);
});

/** Groups of `size` consecutive cells whose every column was refused (they submit but read nothing back). */
const emptyGroups = (cells: { error: string | null }[], size: number) =>
  Array.from({ length: Math.ceil(cells.length / size) }, (_, g) => cells.slice(g * size, (g + 1) * size)).filter((g) => g.every((x) => x.error !== null)).length;

describe('TRL run context', () => {
  it('dapo over several processes without num_items_in_batch is refused, naming the field; grpo does not need it', async () => {
    const gpu = await testGpu();
    for (const [file, refused] of [['case_03.safetensors', true], ['case_00.safetensors', false]] as const) {
      const { st, c } = load('trl', file);
      const { logits: _l, V: _v, ...inputs } = c;
      const run = { num_processes: 2, gradient_accumulation_steps: c.run.gradient_accumulation_steps };
      const r = trainerLossFromLogps(gpu, { ...inputs, run }, scoredOf(st, c));
      if (refused) await expect(r).rejects.toThrow(/^run\.num_items_in_batch: needed by loss_type dapo with num_processes = 2/);
      else expectClose([(await r).loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${file} loss` });
    }
  }, 60_000);
});
