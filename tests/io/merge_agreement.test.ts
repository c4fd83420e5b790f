// Merging the files of one step (src/io/formats/index.ts mergeImports, what `grpo-studio doctor a b`, `convert a b`
// and the page's multi-file import run) checks instead of trusting the first file: every run-context and config
// field of the trainer's settings tables the files carry must agree (a disagreement is one line naming both files
// and both values), TRL ranks must be distinct with equal row counts (a subset is kept, its missing ranks named),
// and OpenRLHF experiences must not claim one sample position. NaN / ±Inf num_items_in_batch is refused at
// import, and a batch that still carries one is refused before a step, never replaced by the local count.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { importBatch, readAnyBatch } from '../../src/io/formats/index.ts';
import { serializeBatch } from '../../src/io/batch.ts';
import { runTable, effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { readBatchFor } from '../../src/cli/args.ts';
import { parseSafeTensors, writeSafeTensors } from '../../src/io/safetensors.ts';
import { editSafetensors, scalarTensor } from '../helpers/safetensors_edit.ts';
import { refusal } from '../helpers/refusal.ts';

const dir = path.resolve(import.meta.dirname, '..', 'fixtures', 'formats');
const fixture = (name: string) => new Uint8Array(readFileSync(path.join(dir, name)));
const R0 = 'trl-rank0.safetensors';
const R1 = 'trl-rank1.safetensors';
const merge = (files: [string, Uint8Array][]) => importBatch(files.map(([name, bytes]) => ({ name, bytes })));

describe('TRL rank files that agree', () => {
  it('merge whole groups in rank order, whatever order they are given in, with no missing-rank note', () => {
    for (const order of [[R0, R1], [R1, R0]]) {
      const r = merge(order.map((n) => [n, fixture(n)] as [string, Uint8Array]));
      expect(r.batch.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
      expect(r.batch.config).toMatchObject({ rank: [0, 1], num_processes: 2, gradient_accumulation_steps: 2 });
      expect(r.batch.run).toEqual({ num_items_in_batch: 35, eos_token_id: 2 }); // the hook's eos_token_id: the tokenizer's
      expect(r.notes[0]).toBe(`merged 2 files: ${R0}, ${R1}`);
      expect(r.notes.join('\n')).not.toMatch(/missing/);
    }
  });
});

describe('disagreeing run context is refused, naming both files and values', () => {
  it('num_processes 2 vs 3', () => {
    const r1 = editSafetensors(fixture(R1), { num_processes: '3', rewards: undefined });
    expect(refusal(() => merge([[R0, fixture(R0)], [R1, r1]]))).toBe(`${R1}: cannot merge: config.num_processes 3, ${R0} has 2`);
  });

  it('num_items_in_batch 35 vs 40 (the 0-d tensor), and given in one file only', () => {
    const r1 = editSafetensors(fixture(R1), {}, { num_items_in_batch: scalarTensor('F32', 40) });
    expect(refusal(() => merge([[R0, fixture(R0)], [R1, r1]]))).toBe(`${R1}: cannot merge: run.num_items_in_batch 40, ${R0} has 35`);
    const none = editSafetensors(fixture(R1), {}, { num_items_in_batch: undefined });
    expect(refusal(() => merge([[R0, fixture(R0)], [R1, none]]))).toBe(`${R1}: cannot merge: run.num_items_in_batch absent, ${R0} has 35`);
  });

  it('num_generations and a GRPOConfig field (beta) in the args', () => {
    const cfg = JSON.parse(parseSafeTensors(fixture(R1)).metadata.config);
    const g = editSafetensors(fixture(R1), { config: JSON.stringify({ ...cfg, num_generations: 6 }) });
    expect(refusal(() => merge([[R0, fixture(R0)], [R1, g]]))).toBe(`${R1}: cannot merge: num_generations 6, ${R0} has 4`);
    const beta = editSafetensors(fixture(R1), { config: JSON.stringify({ ...cfg, beta: 0.1 }) });
    expect(refusal(() => merge([[R0, fixture(R0)], [R1, beta]]))).toBe(`${R1}: cannot merge: config.beta 0.1, ${R0} has 0.04`);
  });

  // Every numeric row of TRL's run table (not a hand list): two ranks that disagree on it are refused.
  const rows = runTable('trl').filter((s) => s.name !== 'rank' && (s.type === 'integer' || s.type === 'number'));
  it.each(rows.map((s) => [s.name, s.type]))('run table row %s', (name) => {
    const [a, b] = name === 'last_world_entropy' ? [0.5, 0.75] : [4, 5];
    // Where a hook may write it: top-level metadata and args.to_dict() (the per-rank rewards list is left out: its length follows num_processes).
    const cfg = JSON.parse(parseSafeTensors(fixture(R0)).metadata.config);
    const file = (bytes: Uint8Array, v: number) => editSafetensors(bytes, { [name]: String(v), config: JSON.stringify({ ...cfg, [name]: v }), rewards: undefined }, { num_items_in_batch: undefined });
    const msg = refusal(() => merge([[R0, file(fixture(R0), a)], [R1, file(fixture(R1), b)]]));
    // The hook's eos_token_id is the tokenizer's EOS and the batch's EOS carrier too: the batch field is named first.
    const field = name === 'eos_token_id' ? `eos_token_ids \\[${b}\\], ${R0.replace('.', '\\.')} has \\[${a}\\]` : `(config|run)\\.${name} ${b}, ${R0.replace('.', '\\.')} has ${a}`;
    expect(msg).toMatch(new RegExp(`^${R1.replace('.', '\\.')}: cannot merge: ${field}$`));
  });
});

describe('TRL ranks', () => {
  it('the same rank twice is refused, naming both files', () => {
    expect(refusal(() => merge([[R0, fixture(R0)], ['copy-of-rank0.safetensors', fixture(R0)]]))).toBe(`copy-of-rank0.safetensors: cannot merge: rank 0, ${R0} is rank 0 too (one file per process)`);
  });

  it('a subset of the ranks merges, the missing ones named in a note', () => {
    const of3 = (rank: number) => editSafetensors(fixture(R0), { rank: String(rank), num_processes: '3', rewards: undefined });
    const r = merge([['r2', of3(2)], ['r0', of3(0)]]);
    expect(r.batch.config?.rank).toEqual([0, 2]);
    expect(r.batch.group_ids).toEqual([0, 0, 0, 0, 1, 1, 3, 3, 3, 3, 4, 4]); // rows 0…5 and 12…17 of 18
    expect(r.notes).toContain('ranks 0, 2 of 3: rank 1 missing (global samples 6…11 are not here; groups they cut stay partial)');
  });

  it('ranks with different row counts are refused (process_slice gives every process B rows)', () => {
    const trl = (rank: number, B: number) => writeSafeTensors({
      prompt_ids: { dtype: 'I64', shape: [B, 1], data: new BigInt64Array(B).fill(5n) },
      completion_ids: { dtype: 'I64', shape: [B, 2], data: new BigInt64Array(2 * B).fill(7n) },
      completion_mask: { dtype: 'I32', shape: [B, 2], data: new Int32Array(2 * B).fill(1) },
    }, { config: '{"num_generations": 2}', rank: String(rank), num_processes: '2', pad_token_id: '0', eos_token_id: '2' });
    expect(refusal(() => merge([['a', trl(0, 4)], ['b', trl(1, 2)]]))).toBe('b: cannot merge: rank 1 has 2 rows, a (rank 0) has 4 (TRL\'s process_slice gives every process the same number of rows)');
  });
});

describe('OpenRLHF experiences', () => {
  const X = 'openrlhf-experience.safetensors'; // index [2, 0, 3, 1], n_samples_per_prompt 2
  it('disjoint sample positions merge into whole groups', () => {
    const r = merge([[X, fixture(X)], ['exp-b.safetensors', editSafetensors(fixture(X), { index: '[4, 5, 6, 7]' })]]);
    expect(r.batch.group_ids).toEqual([1, 0, 1, 0, 2, 2, 3, 3]);
  });
  it('two experiences claiming one sample position are refused, naming both files and the position', () => {
    const b = editSafetensors(fixture(X), { index: '[4, 5, 6, 3]' });
    expect(refusal(() => merge([[X, fixture(X)], ['exp-b.safetensors', b]]))).toBe(`exp-b.safetensors: cannot merge: sample position 3 (row 3) is also in ${X}: two files claim one sample, so their groups would mix prompts`);
  });
  it('experiences of different n_samples_per_prompt are refused', () => {
    const b = editSafetensors(fixture(X), { index: '[4, 5, 6, 7]', n_samples_per_prompt: '4' });
    expect(refusal(() => merge([[X, fixture(X)], ['exp-b.safetensors', b]]))).toBe(`exp-b.safetensors: cannot merge: num_generations 4, ${X} has 2`);
  });
});

describe('num_items_in_batch that is no number', () => {
  it.each([
    ['a NaN F32 tensor', { num_items_in_batch: scalarTensor('F32', NaN) }, {}, /the 0-d tensor num_items_in_batch \(dtype F32\) = NaN: not a token count/],
    ['an Inf F64 tensor', { num_items_in_batch: scalarTensor('F64', Infinity) }, {}, /the 0-d tensor num_items_in_batch \(dtype F64\) = Infinity: not a token count/],
    ['-Infinity in the metadata', { num_items_in_batch: undefined }, { num_items_in_batch: '-Infinity' }, /__metadata__ num_items_in_batch = -Infinity: not a token count/],
    ['"NaN" in the run object', { num_items_in_batch: undefined }, { run: '{"num_items_in_batch": "NaN"}' }, /__metadata__ run\.num_items_in_batch = "NaN": not a token count/],
  ] as const)('%s is refused at import, naming the file', (_, tensors, meta, want) => {
    const bytes = editSafetensors(fixture(R0), meta, tensors as never);
    const msg = refusal(() => readAnyBatch(bytes, 'nan.safetensors'));
    expect(msg).toMatch(/^nan\.safetensors: /);
    expect(msg).toMatch(want);
  });

  it('a batch file that carries NaN is refused before a step (never divided by the local count)', () => {
    const { batch } = readAnyBatch(fixture(R0), R0);
    batch.run = { num_items_in_batch: NaN };
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'nan-items-')), 'nan.json');
    writeFileSync(file, serializeBatch(batch));
    expect(() => readBatchFor(file, 'step')).toThrow(/nan\.json: run\.num_items_in_batch = NaN: expected a finite number/);
    // The settings the step resolves refuse it too (the page's path): no fallback to Σ completion_mask.
    expect(() => effectiveSettings('trl', [fileLayer(batch, 'nan.json')])).toThrow(/run\.num_items_in_batch: expected a finite number or null, got NaN/);
  });
});

describe('verl files', () => {
  const V = 'verl-interleaved.safetensors';
  const uids = (): string[] => JSON.parse(parseSafeTensors(fixture(V)).metadata.uid);
  const withUids = (u: string[]) => editSafetensors(fixture(V), { uid: JSON.stringify(u) });
  const groupsOf = (ids: number[]) => new Set(ids).size;

  it("groups follow verl's uid across files: another file's first group is not this file's", () => {
    const u = uids();
    const other = u.map((x) => `other-${x}`);
    const one = merge([[V, fixture(V)]]).batch;
    const both = merge([[V, fixture(V)], ['b.safetensors', withUids(other)]]).batch;
    // Each file's uids label its groups 0, 1, …; merged, the other file's uids are new groups, never the first file's.
    expect(groupsOf(both.group_ids!)).toBe(2 * groupsOf(one.group_ids!));
    const B = one.completion_ids.length;
    for (let b = 0; b < B; b++) expect(both.group_ids!.slice(B)).not.toContain(both.group_ids![b]);
  });

  it('one uid in two files is one group (verl balances a group over data-parallel ranks)', () => {
    const u = uids();
    const both = merge([[V, withUids(u.map((x) => `a-${x}`))], ['b.safetensors', withUids(u.map((x, i) => (i === 0 ? `a-${u[0]}` : `b-${x}`)))]]).batch;
    const B = u.length;
    expect(both.group_ids![B]).toBe(both.group_ids![0]);
  });
});
