// One rule for what a token id is, whichever container holds it: an integer in [0, 2^31) (safetensors.ts
// TOKEN_ID_RANGE / isTokenId). A TRL dump's int64 tensor and the same batch as grpo-batch/v1 JSON give one verdict:
// the dump is refused when read (exit 2), the JSON batch gets a schema error (the Doctor's exit 1; a step's exit 2),
// both naming the sample, the position and the range. A value the message echoes is the one the file wrote: 1e400 is
// Infinity, not null, and an integer past 2^53 is said to be past exact range, not echoed as a neighbour.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { parseBatch, serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { validateBatch } from '../../src/io/validate.ts';
import { diagnose } from '../../src/doctor/index.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';
import { refusal } from '../helpers/refusal.ts';

const dir = path.resolve(import.meta.dirname, '..', 'fixtures', 'formats');
const R0 = new Uint8Array(readFileSync(path.join(dir, 'trl-rank0.safetensors')));
const read = (bytes: Uint8Array, name: string) => readAnyBatch(bytes, name);
const base = read(R0, 'trl-rank0.safetensors');
const [B, T] = [base.batch.completion_ids.length, base.batch.completion_ids[0].length];

/** The fixture with completion_ids[0][0] = x, saved as TRL saves ids: an I64 tensor. */
function dumpWithId(x: bigint): Uint8Array {
  const ids = new BigInt64Array(base.batch.completion_ids.flat().map(BigInt));
  ids[0] = x;
  return editSafetensors(R0, {}, { completion_ids: { dtype: 'I64', shape: [B, T], data: new Uint8Array(ids.buffer) } });
}
/** The same batch as a grpo-batch/v1 file, completion_ids[0][0] written as `text` (digits as a JSON writer puts them). */
function jsonWithId(text: string): Uint8Array {
  const PLACE = 987654321; // no other number in the batch
  const b: GrpoBatch = { ...base.batch, completion_ids: base.batch.completion_ids.map((r, i) => (i === 0 ? [PLACE, ...r.slice(1)] : r)) };
  return new TextEncoder().encode(serializeBatch(b).replace(String(PLACE), text));
}
const idErrors = (batch: GrpoBatch) => diagnose(batch).findings.filter((f) => f.severity === 'error' && f.field === 'completion_ids').map((f) => f.message);

describe('a token id is one thing in every container', () => {
  it('an I64 dump and the same batch as JSON agree on every id: refused exactly outside [0, 2^31)', () => {
    const id = fc.oneof(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 2 ** 31, max: 2 ** 53 - 1 }), fc.integer({ min: -(2 ** 53 - 1), max: -1 }), fc.constantFrom(0, 2 ** 31 - 1, 2 ** 31, 2 ** 32, -1));
    fc.assert(
      fc.property(id, (x) => {
        const valid = x >= 0 && x < 2 ** 31;
        let dumpRefusal: string | undefined;
        try {
          read(dumpWithId(BigInt(x)), 'trl.safetensors');
        } catch {
          dumpRefusal = refusal(() => read(dumpWithId(BigInt(x)), 'trl.safetensors'));
        }
        const jsonErrors = idErrors(read(jsonWithId(String(x)), 'b.json').batch);
        expect(dumpRefusal === undefined).toBe(valid);
        expect(jsonErrors.length === 0).toBe(valid);
        if (!valid) {
          expect(dumpRefusal).toBe(`trl.safetensors: completion_ids[0][0] (sample 0, position 0) = ${x} (dtype I64) is not a token id in [0, 2^31)`);
          expect(jsonErrors).toEqual([`completion_ids[0][0] = ${x} is not a token id in [0, 2^31)`]);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('the review case: 2^33 is refused by both', () => {
    expect(refusal(() => read(dumpWithId(2n ** 33n), 'trl.safetensors'))).toMatch(/= 8589934592 \(dtype I64\) is not a token id in \[0, 2\^31\)$/);
    expect(idErrors(read(jsonWithId('8589934592'), 'b.json').batch)).toEqual(['completion_ids[0][0] = 8589934592 is not a token id in [0, 2^31)']);
  });

  it('a known vocabulary narrows the range and names it', () => {
    const b = parseBatch(new TextDecoder().decode(jsonWithId('50')), 'b.json');
    expect(validateBatch(b, { vocab_size: 50 }).map((f) => f.message)).toContain('completion_ids[0][0] = 50 is not a token id in [0, 50)');
  });
});

describe('the value a message echoes is the one the file wrote', () => {
  it('1e400 (Infinity once read) is echoed as Infinity, not null', () => {
    expect(idErrors(read(jsonWithId('1e400'), 'b.json').batch)).toEqual(['completion_ids[0][0] = Infinity is not a token id in [0, 2^31)']);
    expect(idErrors(read(jsonWithId('-1e400'), 'b.json').batch)).toEqual(['completion_ids[0][0] = -Infinity is not a token id in [0, 2^31)']);
  });

  it('an integer past 2^53 is said to be past exact range, never echoed as the neighbour it reads as', () => {
    const [msg] = idErrors(read(jsonWithId('9007199254740993'), 'b.json').batch);
    expect(msg).toMatch(/^completion_ids\[0\]\[0\] = about 9\.00719925474099\d*e\+15 \(beyond 2\^53, where a JSON number is no longer exact\) is not a token id in \[0, 2\^31\)$/);
    expect(msg).not.toContain('9007199254740992');
  });

  it('a mask value of Infinity (what 1e400 reads as) is echoed as Infinity, not null', () => {
    const b = parseBatch(new TextDecoder().decode(jsonWithId('5')), 'b.json');
    b.completion_mask[1][2] = Infinity;
    expect(validateBatch(b).map((f) => f.message)).toContain('completion_mask[1][2] = Infinity: masks hold 0 or 1');
  });

  it('a JSON-rows reader (prime-rl) says the same of an id past 2^53', () => {
    const text = readFileSync(path.join(dir, 'prime-rl-short-loss-mask.jsonl'), 'utf8').replace('"token_ids":[11,', '"token_ids":[9007199254740993,');
    const msg = refusal(() => read(new TextEncoder().encode(text), 'r.jsonl'));
    expect(msg).toMatch(/token_ids\[0\] \(sample 0, position 0\) = about 9\.00719925474099\d*e\+15 \(beyond 2\^53, where a JSON number is no longer exact\) is not a token id in \[0, 2\^31\)$/);
  });
});
