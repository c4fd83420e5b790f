// A TRL dump may give its process settings (rank, num_processes, gradient_accumulation_steps) at several places:
// the hook's top-level metadata keys, a "run" object, and the saved config. Places that agree are one value (rank
// "0" and 0 alike); places that disagree are a one-line refusal naming both places and both values — never one of
// them silently kept, since the rank decides which global samples, and so which groups, the rows are.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { parseSafeTensors } from '../../src/io/safetensors.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';
import { refusal } from '../helpers/refusal.ts';

// trl-rank0: top-level rank "0", num_processes "2"; config with num_generations 4, gradient_accumulation_steps 2; 6 rows.
const R0 = new Uint8Array(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures', 'formats', 'trl-rank0.safetensors')));
const CONFIG = JSON.parse(parseSafeTensors(R0, 'trl-rank0.safetensors').metadata.config) as Record<string, unknown>;
const B = 6;
const G = 4;

type Places = { top?: number; run?: number; config?: number };
/** The fixture with `key` given at exactly the places named (top-level as the hook's str(), run / config as JSON numbers). */
function dumpWith(key: string, at: Places, rest: Record<string, unknown> = {}): Uint8Array {
  const config = { ...CONFIG, ...rest };
  delete config[key];
  if (at.config !== undefined) config[key] = at.config;
  return editSafetensors(R0, {
    [key]: at.top === undefined ? undefined : String(at.top),
    run: at.run === undefined ? undefined : JSON.stringify({ [key]: at.run }),
    config: JSON.stringify(config),
  });
}
const read = (bytes: Uint8Array) => readAnyBatch(bytes, 'trl.safetensors');
const ORDER = [['top', ''], ['run', 'run.'], ['config', 'config.']] as const;

describe('rank given at several places', () => {
  it('equal values are one rank; two different values are refused, naming both places and values', () => {
    const place = fc.option(fc.constantFrom(0, 1), { nil: undefined });
    fc.assert(
      fc.property(fc.record({ top: place, run: place, config: place }), (at) => {
        const given = ORDER.filter(([p]) => at[p] !== undefined).map(([p, prefix]) => ({ where: `${prefix}rank`, value: at[p]! }));
        const clash = given.find((g) => g.value !== given[0].value);
        if (clash) {
          expect(refusal(() => read(dumpWith('rank', at)))).toBe(`trl.safetensors: __metadata__ ${given[0].where} = ${given[0].value} and ${clash.where} = ${clash.value} both set rank and disagree`);
          return;
        }
        const rank = given[0]?.value ?? 0; // no place: rank 0
        const r = read(dumpWith('rank', at));
        expect(r.batch.config?.rank).toBe(rank);
        // TRL's process_slice: row b of rank r is global sample r·B + b, of group ⌊(r·B + b) / G⌋.
        expect(r.batch.group_ids).toEqual(Array.from({ length: B }, (_, b) => Math.floor((rank * B + b) / G)));
      }),
      { numRuns: 40 },
    );
  });

  it('the review case: top-level rank "0" and run {"rank": 1} is refused', () => {
    const bytes = editSafetensors(R0, { rank: '0', run: '{"rank": 1, "num_processes": 2}' });
    expect(refusal(() => read(bytes))).toBe('trl.safetensors: __metadata__ rank = 0 and run.rank = 1 both set rank and disagree');
  });

  it('a string and a number of one value agree', () => {
    expect(read(editSafetensors(R0, { rank: '1', run: '{"rank": "1", "num_processes": 2}' })).batch.config).toMatchObject({ rank: 1, num_processes: 2 });
  });

  it('a rank that is no integer is refused by place, not read as rank 0', () => {
    expect(refusal(() => read(editSafetensors(R0, { rank: undefined, run: '{"rank": "one"}' })))).toBe('trl.safetensors: __metadata__ run.rank = "one" is not an integer');
  });
});

describe('num_processes and gradient_accumulation_steps given at several places', () => {
  it.each([
    ['num_processes', { top: 2, run: 4 }, '__metadata__ num_processes = 2 and run.num_processes = 4 both set num_processes and disagree'],
    ['num_processes', { top: 2, config: 3 }, '__metadata__ num_processes = 2 and config.num_processes = 3 both set num_processes and disagree'],
    // The run's current accumulation above the args' is no run's (the last of an epoch is the remainder, below).
    ['gradient_accumulation_steps', { top: 4, config: 2 }, "__metadata__ gradient_accumulation_steps = 4 is above config.gradient_accumulation_steps = 2: the current accumulation is at most the args' (the last of an epoch: the remainder)"],
    ['gradient_accumulation_steps', { top: 4, run: 3 }, '__metadata__ gradient_accumulation_steps = 4 and run.gradient_accumulation_steps = 3 both set gradient_accumulation_steps and disagree'],
  ] as const)('%s at %o is refused', (key, at, want) => {
    expect(refusal(() => read(dumpWith(key, at)))).toBe(`trl.safetensors: ${want}`);
  });

  it.each([
    ['num_processes', { top: 2, run: 2, config: 2 }],
    ['gradient_accumulation_steps', { top: 4, run: 4, config: 4 }],
    ['gradient_accumulation_steps', { top: 4 }],
    ['gradient_accumulation_steps', { run: 4 }],
  ] as const)('%s at %o agrees and is read', (key, at) => {
    const value = Object.values(at)[0];
    expect((read(dumpWith(key, at)).batch.config as Record<string, unknown>)[key]).toBe(value);
  });

  it("the current accumulation below the args' (transformers' last, partial one of an epoch) is the one read, with a note", () => {
    for (const at of [{ top: 1, config: 2 }, { run: 1, config: 8 }] as const) {
      const r = read(dumpWith('gradient_accumulation_steps', at));
      expect((r.batch.config as Record<string, unknown>).gradient_accumulation_steps).toBe(1);
      expect(r.notes.join('\n')).toMatch(/the epoch's last, partial accumulation; its loss divides by 1/);
    }
  });
});

describe('run-context keys given at several places', () => {
  it('global_step at the top level and in the saved TrainerState must agree', () => {
    expect(refusal(() => read(editSafetensors(R0, { global_step: '7', state: '{"global_step": 8}' })))).toBe('trl.safetensors: __metadata__ global_step = 7 and state.global_step = 8 both set global_step and disagree');
    expect(read(editSafetensors(R0, { global_step: '7', state: '{"global_step": 7}' })).batch.run?.global_step).toBe(7);
  });
});
