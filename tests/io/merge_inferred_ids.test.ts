// Merging files whose pad / EOS ids were inferred (src/io/formats/index.ts mergeImports): prime-rl's token export
// carries no id (PrimeIntellect-ai/prime-rl src/prime_rl/trainer/rl/token_export.py), so each rank file's reader
// votes its EOS from that file's last trained tokens (common.ts tokenIds) and the trimmed rows leave the EOS to stand
// in for the pad. A rank whose vote differs must not refuse the merge over an id no file holds: the ids are voted
// again over the merged rows. Ids a file does read (its carriers, a tokenizer) still refuse when they disagree, and
// win over another file's guess. A rank with no tool turn merges with one that has them (tool_mask all 1).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { importBatch, mergeImports, readAnyBatch, type ImportOptions } from '../../src/io/formats/index.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';
import { refusal } from '../helpers/refusal.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const record = (rank: number, ids: number[], mask: number[]) => JSON.stringify({ schema_version: 1, step: 3, rank, token_ids: ids, loss_mask: mask.map((m) => m === 1) });
// Rank 0: a single-turn row and a multi-turn one (a tool turn inside), every assistant turn closed by EOS 2 but the
// tool call's (7). Rank 1: one row cut by the length limit, so its last trained token is text (99).
const RANK0 = [
  record(0, [11, 12, 13, 40, 41, 2], [0, 0, 0, 1, 1, 1]),
  record(0, [21, 22, 42, 7, 90, 91, 43, 2], [0, 0, 1, 1, 0, 0, 1, 1]),
].join('\n') + '\n';
const RANK1 = record(1, [31, 32, 50, 51, 99], [0, 0, 1, 1, 1]) + '\n';
const files = { 'rank_0.jsonl': RANK0, 'rank_1.jsonl': RANK1 } as const;
const read = (name: keyof typeof files, opts: ImportOptions = {}) => ({ name, result: readAnyBatch(enc(files[name]), name, opts) });


describe('prime-rl rank files whose inferred ids differ', () => {
  it('each file alone votes its own EOS (the premise)', () => {
    expect(read('rank_0.jsonl').result.batch.eos_token_ids).toEqual([2]);
    expect(read('rank_1.jsonl').result.batch.eos_token_ids).toEqual([99]);
    expect(read('rank_1.jsonl').result.inferred?.pad_token_id).toMatch(/^inferred as the EOS id/);
  });

  it('merge in either order, the ids voted over all rows: spans end 2, 7, 2 (rank 0) and 99 (rank 1), so EOS 2 and pad 2', () => {
    for (const order of [['rank_0.jsonl', 'rank_1.jsonl'], ['rank_1.jsonl', 'rank_0.jsonl']] as const) {
      const r = importBatch(order.map((name) => ({ name, bytes: enc(files[name]) })));
      expect(r.batch.eos_token_ids).toEqual([2]);
      expect(r.batch.pad_token_id).toBe(2);
      expect(r.inferred?.eos_token_ids).toBe('inferred from the last trained token of 2 of 4 trained spans of the 2 merged files');
      expect(r.inferred?.pad_token_id).toMatch(/^inferred as the EOS id/);
      expect(r.notes.join('\n')).toMatch(/eos_token_ids: the files inferred different ids \(rank_[01]\.jsonl: \[(2|99)\], rank_[01]\.jsonl: \[(2|99)\]\); \[2\]/);
      // Rank 1 has no tool turn, hence no tool_mask: its row is all 1 in the merged batch.
      const row = r.batch.completion_ids.findIndex((ids) => ids.at(-1) === 99);
      expect(r.batch.tool_mask![row]).toEqual([1, 1, 1]);
      expect(r.batch.tool_mask![r.batch.completion_ids.findIndex((ids) => ids[0] === 42)]).toEqual([1, 1, 0, 0, 1, 1]);
    }
  });

  it('an id one file reads (the tokenizer given for it) wins over the other file\'s guess, and is no longer inferred', () => {
    const r = mergeImports([read('rank_0.jsonl'), read('rank_1.jsonl', { pad_token_id: 0, eos_token_ids: [99] })]);
    expect(r.batch.eos_token_ids).toEqual([99]);
    expect(r.batch.pad_token_id).toBe(0);
    expect(r.inferred).toBeUndefined();
    expect(r.notes).toContain('eos_token_ids: rank_0.jsonl inferred [2]; rank_1.jsonl reads [99]: that is kept for all');
  });

  it('ids two files read and disagree on still refuse, naming both files and values', () => {
    const parts = [read('rank_0.jsonl', { pad_token_id: 0, eos_token_ids: [2] }), read('rank_1.jsonl', { pad_token_id: 5, eos_token_ids: [2] })];
    expect(refusal(() => mergeImports(parts))).toBe('rank_1.jsonl: cannot merge: pad_token_id 5, rank_0.jsonl has 0');
    // The first file guessing does not hide two later files that read different ids.
    const later = [read('rank_0.jsonl'), read('rank_1.jsonl', { pad_token_id: 0, eos_token_ids: [2] }), { ...read('rank_1.jsonl', { pad_token_id: 0, eos_token_ids: [7] }), name: 'rank_2.jsonl' }];
    expect(refusal(() => mergeImports(later))).toBe('rank_2.jsonl: cannot merge: eos_token_ids [7], rank_1.jsonl has [2]');
  });

  it('TRL ranks carrying different pad ids in their metadata refuse', () => {
    const dir = path.resolve(import.meta.dirname, '..', 'fixtures', 'formats');
    const r0 = new Uint8Array(readFileSync(path.join(dir, 'trl-rank0.safetensors')));
    const r1 = editSafetensors(new Uint8Array(readFileSync(path.join(dir, 'trl-rank1.safetensors'))), { pad_token_id: '5' });
    expect(refusal(() => importBatch([{ name: 'trl-rank0.safetensors', bytes: r0 }, { name: 'trl-rank1.safetensors', bytes: r1 }]))).toBe('trl-rank1.safetensors: cannot merge: pad_token_id 5, trl-rank0.safetensors has 0');
  });
});
