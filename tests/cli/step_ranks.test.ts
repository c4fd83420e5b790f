// `grpo-studio step` on TRL rank files merged into one batch (src/io/formats/index.ts mergeImports): each process
// aggregates its own rows and DDP averages the processes' gradients, so the merged batch's loss is the mean of each
// rank's loss stepped alone, whatever the loss type's normaliser (bnpo's per-process token count, dapo's global
// count ÷ num_processes, the entropy bonus's per-process mean). A batch that is a share of the trainer's optimizer
// step (other processes, other micro-batches) says so in `update_scope` and on stderr.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { GOLDEN } from '../helpers/golden.ts';

const MODEL = join(GOLDEN, 'tiny-gpt2');
const FORMATS = resolve(__dirname, '../fixtures/formats');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
type Batch = { config: Record<string, unknown>; run?: Record<string, unknown> };

let dir = '';
const batches: Record<'r0' | 'r1' | 'both', Batch> = {} as never;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'step-ranks-'));
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'log').mockImplementation(() => {});
  const files = { r0: ['trl-rank0.safetensors'], r1: ['trl-rank1.safetensors'], both: ['trl-rank1.safetensors', 'trl-rank0.safetensors'] };
  for (const [k, f] of Object.entries(files)) {
    expect(await main(['convert', ...f.map((x) => join(FORMATS, x)), '--out', join(dir, `${k}.json`)])).toBe(0);
    batches[k as keyof typeof batches] = read<Batch>(join(dir, `${k}.json`));
  }
  // The fixtures: dapo over num_processes 2, gradient_accumulation_steps 2, num_items_in_batch over both ranks.
  expect(batches.both.config).toMatchObject({ loss_type: 'dapo', rank: [0, 1], num_processes: 2, gradient_accumulation_steps: 2 });
}, 120_000);

async function step(which: keyof typeof batches, config: Record<string, unknown> = {}, run: Record<string, unknown> = {}): Promise<{ code: number; r: StepCliResult | null; stderr: string[] }> {
  const b = batches[which];
  const path = join(dir, `${which}-${Object.keys(config).join('-')}-${Object.keys(run).join('-')}.json`);
  writeFileSync(path, JSON.stringify({ ...b, config: { ...b.config, ...config }, run: { ...b.run, ...run } }));
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  err.mockClear();
  const out = join(dir, 'r.json');
  const code = await main(['step', '--model', MODEL, '--batch', path, '--out', out]);
  return { code, r: code === 0 ? read<StepCliResult>(out) : null, stderr: err.mock.calls.map((c) => String(c[0])) };
}

describe('TRL rank files merged: the mean of each rank stepped alone', () => {
  const VARIANTS: Array<[string, Record<string, unknown>]> = [
    ['dapo (num_items_in_batch / num_processes)', {}],
    ['bnpo (each process its own token count)', { loss_type: 'bnpo' }],
    ['grpo with an entropy bonus (each process its own mean entropy)', { loss_type: 'grpo', entropy_coef: 0.5 }],
  ];
  for (const [name, config] of VARIANTS) {
    it(name, async () => {
      const [both, r0, r1] = [await step('both', config), await step('r0', config), await step('r1', config)];
      expect(both.code).toBe(0);
      expect(both.r!.objective?.trainer).toBe('trl');
      const mean = (r0.r!.loss + r1.r!.loss) / 2;
      expect(Math.abs(both.r!.loss - mean)).toBeLessThan(1e-6 * Math.abs(mean) + 1e-9);
      // Not the rows pooled as one process's: that would be the sum (dapo) or another normaliser (bnpo, entropy).
      expect(Math.abs(both.r!.loss - (r0.r!.loss + r1.r!.loss))).toBeGreaterThan(1e-4);
    }, 240_000);
  }

  it('top_entropy_quantile takes its threshold over every process: refused for one rank, stepped with both', async () => {
    const one = await step('r0', { top_entropy_quantile: 0.5 });
    expect(one.code).toBe(2);
    expect(one.stderr.join('\n')).toMatch(/top_entropy_quantile.*holds 1 of them/);
    const both = await step('both', { top_entropy_quantile: 0.5 });
    expect(both.code).toBe(0);
    expect(both.r!.loss).not.toBe((await step('both')).r!.loss);
  }, 240_000);

  it('luspo over several processes is refused at either IS level (each averages over its own padded width)', async () => {
    for (const level of ['token', 'sequence']) {
      const r = await step('both', { loss_type: 'luspo', importance_sampling_level: level });
      expect(r.code).toBe(2);
      expect(r.stderr.join('\n')).toMatch(/luspo over 2 processes' rows/);
    }
  }, 120_000);

  it("dapo with every rank's rows needs no num_items_in_batch: their own count is TRL's gathered one", async () => {
    const given = await step('both');
    const counted = await step('both', {}, { num_items_in_batch: null });
    expect(counted.code).toBe(0);
    expect(Math.abs(counted.r!.loss - given.r!.loss)).toBeLessThan(1e-6 * Math.abs(given.r!.loss));
    expect((await step('r0', {}, { num_items_in_batch: null })).code).toBe(2); // one rank's count is not the gathered one
  }, 240_000);
});

describe('update_scope: the share of the trainer\'s optimizer step the batch is', () => {
  it('one rank of two, two micro-batches per step: both named, on stderr too', async () => {
    const { r, stderr } = await step('r0');
    expect(r!.update_scope).toMatch(/averages the gradients of 2 processes \(the batch holds rank 0's rows\)/);
    expect(r!.update_scope).toMatch(/accumulates 2 micro-batches/);
    expect(stderr).toContain(`note: ${r!.update_scope}`);
  }, 120_000);

  it('both ranks, one micro-batch per step: the whole step, nothing said', async () => {
    const both = await step('both', {}, { gradient_accumulation_steps: 1 });
    expect(both.r!.update_scope).toBeNull();
    expect(both.stderr.some((l) => l.startsWith('note:'))).toBe(false);
    const one = await step('r1', {}, { gradient_accumulation_steps: 1 });
    expect(one.r!.update_scope).toMatch(/^the trainer's optimizer step averages the gradients of 2 processes \(the batch holds rank 1's rows\): /);
  }, 240_000);
});
