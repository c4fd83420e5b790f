// One batch, one answer: pad / EOS ids a reader inferred stay inferred when the batch is saved as grpo-batch/v1
// (`convert`, serializeBatch with inferred_ids) and read back, so the Doctor's findings that rest on them are the
// same warnings on the converted file as on the source, never errors; a tokenizer given to both reads replaces
// the guess in both. A malformed inferred_ids is one line naming the field.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { run as convert } from '../../src/cli/convert.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { BatchFormatError, serializeBatch } from '../../src/io/batch.ts';
import { readAnyBatch, type ImportOptions, type ImportResult } from '../../src/io/formats/index.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
// NeMo-RL carries no pad / EOS id: both are inferred, and row 0's mask covers a pad (mask-covers-padding).
const SOURCE = path.join(root, 'tests/fixtures/formats/nemo-rl-mask-on-pad.jsonl');
const read = (file: string, opts?: ImportOptions) => readAnyBatch(new Uint8Array(readFileSync(file)), path.basename(file), opts);
const verdicts = (r: ImportResult) => diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred)).findings.map((f) => `${f.rule} ${f.sample} ${f.severity}`).sort();

/** The source converted by `grpo-studio convert` (in process), and the path of the written file. */
async function converted(): Promise<string> {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'saved-ways-')), 'batch.json');
  expect(await convert([SOURCE, '--out', out])).toBe(0);
  return out;
}

/** A grpo-batch/v1 text of the source with `inferred_ids` set to `v` as written. */
const withInferred = (v: unknown) => {
  const o = JSON.parse(serializeBatch(read(SOURCE).batch)) as Record<string, unknown>;
  return new TextEncoder().encode(JSON.stringify({ ...o, inferred_ids: v }));
};

describe('inferred pad / EOS ids survive grpo-batch/v1', () => {
  beforeEach(() => void vi.spyOn(console, 'error').mockImplementation(() => {}));
  afterEach(() => vi.restoreAllMocks());

  it('convert writes which ids were inferred; the converted file reads them back and the Doctor says the same', async () => {
    const source = read(SOURCE);
    expect(Object.keys(source.inferred ?? {}).sort()).toEqual(['eos_token_ids', 'pad_token_id']);
    expect(verdicts(source)).toContain('mask-covers-padding 0 warning');
    const file = await converted();
    const back = read(file);
    expect(back.inferred).toEqual(source.inferred);
    // In memory the import result holds them, not the batch (one place).
    expect(back.batch).not.toHaveProperty('inferred_ids');
    expect(verdicts(back)).toEqual(verdicts(source));
    // Converting the converted file keeps them too.
    const again = readAnyBatch(new TextEncoder().encode(serializeBatch({ ...back.batch, inferred_ids: back.inferred })), 'again.json');
    expect(verdicts(again)).toEqual(verdicts(source));
  });

  it('a tokenizer given to the read replaces the inferred ids in the converted file as in the source', async () => {
    const ids = { pad_token_id: 0, eos_token_ids: [2] };
    const source = read(SOURCE, ids);
    expect(source.inferred).toBeUndefined();
    const back = read(await converted(), ids);
    expect(back.inferred).toBeUndefined();
    expect([back.batch.pad_token_id, back.batch.eos_token_ids]).toEqual([source.batch.pad_token_id, source.batch.eos_token_ids]);
    expect(verdicts(back)).toEqual(verdicts(source));
    expect(verdicts(back)).toContain('mask-covers-padding 0 error');
  });

  it('a file whose ids are read (no inferred_ids) is unchanged: its findings rest on certain ids', () => {
    const r = readAnyBatch(new TextEncoder().encode(serializeBatch(read(SOURCE).batch)), 'plain.json');
    expect(r.inferred).toBeUndefined();
    expect(verdicts(r)).toContain('mask-covers-padding 0 error');
  });

  it.each([
    ['a list', ['pad_token_id'], /field "inferred_ids" must be an object/],
    ['a string', 'pad', /field "inferred_ids" must be an object/],
    ['an unknown key', { pad_id: 'guessed' }, /field "inferred_ids" has key "pad_id": expected pad_token_id or eos_token_ids/],
    ['a reason that is not text', { pad_token_id: true }, /field "inferred_ids"\.pad_token_id must be a non-empty string/],
    ['an empty reason', { eos_token_ids: ' ' }, /field "inferred_ids"\.eos_token_ids must be a non-empty string/],
  ])('inferred_ids as %s: one line naming the field', (_what, v, message) => {
    let err: unknown;
    try {
      readAnyBatch(withInferred(v), 'bad.json');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatchFormatError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).toMatch(/^bad\.json: /);
    expect((err as Error).message).not.toContain('\n');
  });

  it('inferred_ids null or {} is no inference', () => {
    for (const v of [null, {}]) expect(readAnyBatch(withInferred(v), 'none.json').inferred).toBeUndefined();
  });
});
