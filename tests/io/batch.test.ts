// Batch format (parse / serialize / validate) and assembly (padding, masks, position ids) against the
// golden fixtures: the padded tensors in golden.safetensors were built by PyTorch from the same batch.json.
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { BatchFormatError, NONFINITE_NOTE, parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { validateBatch } from '../../src/io/validate.ts';
import { assembleBatch, completionMaskFromEos, padBatch, raggedFromPadded } from '../../src/grpo/batch.ts';
import { positionIds } from '../../src/model/positions.ts';
import { parseSafeTensors, toI32 } from '../../src/io/safetensors.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const golden = path.resolve(root, 'tests/golden/models');
const models = readdirSync(golden).filter((m) => m.startsWith('tiny-'));

describe('padBatch matches the golden padded tensors', () => {
  for (const m of models) {
    it(m, () => {
      const batch = parseBatch(readFileSync(path.join(golden, m, 'batch.json'), 'utf8'));
      const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(golden, m, 'golden.safetensors'))));
      const p = padBatch(batch);
      expect([p.B, p.P, p.C, p.L]).toEqual([6, 5, 6, 11]);
      expect(p.P).toBe(toI32(st, 'prompt_length')[0]);
      expect([...p.input_ids]).toEqual([...toI32(st, 'input_ids')]);
      expect([...p.attention_mask]).toEqual([...toI32(st, 'attention_mask')]);
      expect([...p.position_ids]).toEqual([...toI32(st, 'position_ids')]);
      expect([...p.completion_mask]).toEqual([...toI32(st, 'completion_mask')]);
      expect([...p.prompt_lengths]).toEqual([2, 2, 4, 4, 5, 5]);
      expect([...p.completion_lengths]).toEqual([3, 6, 1, 4, 6, 2]);
      if (st.tensors.has('arange_position_ids')) {
        expect([...padBatch(batch, { position_ids: 'arange' }).position_ids]).toEqual([...toI32(st, 'arange_position_ids')]);
      }
      // Padding of per-token arrays: 0.0 beyond each row, values in place.
      const old = p.old_per_token_logps!;
      expect(old[0 * 6 + 3]).toBe(0);
      expect(old[1 * 6 + 5]).toBe(Math.fround(batch.old_per_token_logps![1][5]));
      // And back to ragged rows for export: the batch's own rows, in float32.
      expect(raggedFromPadded(old, p)).toEqual(batch.old_per_token_logps!.map((r) => r.map(Math.fround)));
    });
  }
});

describe('masks and positions', () => {
  it('completion mask keeps up to and including the first EOS (any EOS id)', () => {
    expect(completionMaskFromEos([5, 6, 2, 7, 1], [1, 2])).toEqual([1, 1, 1, 0, 0]);
    expect(completionMaskFromEos([1, 5], [1])).toEqual([1, 0]);
    expect(completionMaskFromEos([5, 6, 7], [1])).toEqual([1, 1, 1]);
    expect(completionMaskFromEos([], [1])).toEqual([]);
  });

  it('position ids: cumsum − 1 with pads at 1, or arange', () => {
    // Hand-derived: mask 0 0 1 1 1 0 → cumsum 0 0 1 2 3 3 → −1 → pads forced to 1.
    const mask = Int32Array.from([0, 0, 1, 1, 1, 0]);
    expect([...positionIds(mask, 1, 6, 'from_attention_mask')]).toEqual([1, 1, 0, 1, 2, 1]);
    expect([...positionIds(mask, 1, 6, 'arange')]).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('assembleBatch repeats each prompt G times and masks after EOS', () => {
    const b = assembleBatch({ prompt_ids: [[3, 4], [5]], completion_ids: [[7, 1, 9], [8], [1], [6, 6, 1]], num_generations: 2, pad_token_id: 0, eos_token_ids: [1] });
    expect(b.prompt_ids).toEqual([[3, 4], [3, 4], [5], [5]]);
    expect(b.completion_mask).toEqual([[1, 1, 0], [1], [1], [1, 1, 1]]);
    const p = padBatch(b);
    // Row 2: prompt [0, 5] left-padded, completion [1, 0, 0] right-padded.
    expect([...p.input_ids.slice(2 * 5, 3 * 5)]).toEqual([0, 5, 1, 0, 0]);
    expect([...p.attention_mask.slice(2 * 5, 3 * 5)]).toEqual([0, 1, 1, 0, 0]);
    expect([...p.position_ids.slice(2 * 5, 3 * 5)]).toEqual([1, 0, 1, 1, 1]);
    expect(() => assembleBatch({ prompt_ids: [[3]], completion_ids: [[1], [1], [1]], num_generations: 2, pad_token_id: 0, eos_token_ids: [1] })).toThrow(BatchFormatError);
  });

  it('padBatch refuses misaligned per-token rows, naming field and sample', () => {
    const b = assembleBatch({ prompt_ids: [[3]], completion_ids: [[7, 1], [8, 1]], num_generations: 2, pad_token_id: 0, eos_token_ids: [1] });
    b.completion_mask[1] = [1, 1, 1];
    expect(() => padBatch(b)).toThrow(/completion_mask sample 1 has length 3, completion_ids has 2/);
  });
});

describe('grpo-batch/v1 reader and writer', () => {
  const base = readFileSync(path.join(root, 'tests/fixtures/batches/clean.json'), 'utf8');

  it('round-trips, NaN and ±Infinity included (Python json.dump style)', () => {
    const b: GrpoBatch = { ...parseBatch(base), rewards_per_func: [[1, NaN], [NaN, NaN], [0.5, -Infinity], [Infinity, 0]] };
    const text = serializeBatch(b);
    expect(text).toContain('NaN');
    const again = parseBatch(text);
    expect(again.rewards_per_func).toEqual(b.rewards_per_func);
    expect(again.completion_ids).toEqual(b.completion_ids);
    // Strings that merely contain the words stay strings.
    const withText = parseBatch(serializeBatch({ ...b, completion_texts: ['NaN', '"Infinity"', 'x', 'y'] }));
    expect(withText.completion_texts).toEqual(['NaN', '"Infinity"', 'x', 'y']);
  });

  it('writes strict JSON on request: non-finite numbers as null, each listed in the note', () => {
    const b: GrpoBatch = { ...parseBatch(base), rewards: [1, NaN, 0, 1], rewards_per_func: [[1, NaN], [0, 1], [0.5, -Infinity], [1, 0]] };
    const text = serializeBatch(b, { strictJson: true });
    const plain = JSON.parse(text) as Record<string, unknown>; // JSON.parse refuses a bare NaN
    expect((plain.rewards as unknown[])[1]).toBeNull();
    expect(plain[NONFINITE_NOTE]).toEqual(['rewards[1]: NaN', 'rewards_per_func[0][1]: NaN', 'rewards_per_func[2][1]: -Infinity']);
    const again = parseBatch(text);
    expect(again.rewards![1]).toBeNaN();
    expect(again.rewards_per_func![2]).toEqual([0.5, NaN]);
    expect(again.completion_ids).toEqual(b.completion_ids);
    // Writing the re-read batch again keeps one note, not two.
    expect(serializeBatch(again, { strictJson: true }).match(new RegExp(NONFINITE_NOTE, 'g'))).toHaveLength(1);
  });

  it('reads JSON null in numeric rows as NaN', () => {
    const b = parseBatch(base.replace('"completion_mask"', '"rewards_per_func": [[1, null], [0, 1], [null, null], [1, 1]], "completion_mask"'));
    expect(b.rewards_per_func![0][1]).toBeNaN();
  });

  const bad: [string, string, RegExp][] = [
    ['not JSON', '{"format": "grpo-batch/v1",', /not valid JSON/],
    ['wrong tag', base.replace('grpo-batch/v1', 'grpo-batch/v0'), /field "format" is "grpo-batch\/v0"/],
    ['missing field', base.replace('"completion_mask"', '"completion_maskx"'), /missing required field "completion_mask"/],
    ['wrong kind', base.replace('"num_generations": 2', '"num_generations": "2"'), /field "num_generations" must be an integer/],
    ['row not an array', base.replace('[[10, 11, 1]', '[7'), /field "completion_ids" sample 0 is not an array/],
  ];
  for (const [what, text, msg] of bad) {
    it(`raises BatchFormatError: ${what}`, () => {
      let err: unknown;
      try {
        parseBatch(text, 'b.json');
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(BatchFormatError);
      expect((err as Error).name).toBe('BatchFormatError');
      expect((err as Error).message).toMatch(msg);
      expect((err as Error).message).not.toContain('\n');
    });
  }

  it('validation reports element problems with field, sample and position instead of throwing', () => {
    const b = parseBatch(base);
    (b.completion_ids[2] as unknown[])[1] = 'x';
    b.completion_mask[3][1] = 2;
    b.rewards = [1, 0, 1];
    const f = validateBatch(b);
    expect(f.find((x) => x.field === 'completion_ids')).toMatchObject({ sample: 2, span: [1, 2], severity: 'error' });
    expect(f.find((x) => x.field === 'completion_mask')).toMatchObject({ sample: 3, span: [1, 2] });
    expect(f.find((x) => x.field === 'rewards')?.message).toMatch(/3 entries, expected 4/);
    expect(validateBatch(b, { vocab_size: 11 }).find((x) => x.field === 'completion_ids' && x.sample === 0)?.span).toEqual([1, 2]);
  });

  it('golden batches validate without errors', () => {
    for (const m of models) expect(validateBatch(parseBatch(readFileSync(path.join(golden, m, 'batch.json'), 'utf8')))).toEqual([]);
  });
});
