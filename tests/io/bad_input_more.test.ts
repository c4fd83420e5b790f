// Bad values in trainer dumps, read by the importers (src/io/formats): a value that is present but invalid is named
// as such (never reported as missing, never silently replaced by a default or a guess), a file whose distinctive keys
// say which trainer wrote it is read by that reader even when one field is broken, and a value the reader could not
// infer is never made up nor made the ground of an error finding. Inputs are the repo's format fixtures with one
// fact changed.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { BatchFormatError } from '../../src/io/batch.ts';
import { readAnyBatch, type ImportResult } from '../../src/io/formats/index.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';

const dir = path.resolve(import.meta.dirname, '..', 'fixtures', 'formats');
const fixture = (name: string) => new Uint8Array(readFileSync(path.join(dir, name)));
const text = (name: string) => readFileSync(path.join(dir, name), 'utf8');
const enc = (s: string) => new TextEncoder().encode(s);
const metaOf = (name: string): Record<string, string> => {
  const b = fixture(name);
  const n = Number(new DataView(b.buffer, b.byteOffset).getBigUint64(0, true));
  return JSON.parse(new TextDecoder().decode(b.subarray(8, 8 + n))).__metadata__;
};

/** The reader's refusal: one BatchFormatError line starting with the file's name. */
function refusal(bytes: Uint8Array, name: string): string {
  try {
    readAnyBatch(bytes, name);
  } catch (e) {
    expect(e).toBeInstanceOf(BatchFormatError);
    const m = (e as Error).message;
    expect(m.split('\n')).toHaveLength(1);
    expect(m.startsWith(`${name}: `)).toBe(true);
    return m;
  }
  throw new Error(`${name} was read`);
}

describe('a group size that is there but invalid is named, not reported missing', () => {
  const trlConfig = JSON.parse(metaOf('trl-rank0.safetensors').config);
  for (const bad of [0, -4, 'four']) {
    it(`TRL config.num_generations = ${JSON.stringify(bad)}`, () => {
      const m = refusal(editSafetensors(fixture('trl-rank0.safetensors'), { config: JSON.stringify({ ...trlConfig, num_generations: bad }) }), 'trl.safetensors');
      expect(m).toContain(`config.num_generations = ${JSON.stringify(bad)} is not a group size`);
      expect(m).not.toMatch(/has no num_generations/);
    });
  }

  it('TRL without num_generations is still "has no num_generations"', () => {
    const { num_generations: _, ...rest } = trlConfig;
    expect(refusal(editSafetensors(fixture('trl-rank0.safetensors'), { config: JSON.stringify(rest) }), 'trl.safetensors')).toMatch(/config has no num_generations/);
  });

  for (const bad of ['0', '"two"']) {
    it(`OpenRLHF n_samples_per_prompt = ${bad}`, () => {
      const m = refusal(editSafetensors(fixture('openrlhf-experience.safetensors'), { n_samples_per_prompt: bad }), 'orl.safetensors');
      expect(m).toContain(`__metadata__ n_samples_per_prompt = ${bad} is not a group size`);
      expect(m).not.toMatch(/has no n_samples_per_prompt/);
    });
  }
});

describe('a bad value is refused, not silently ignored', () => {
  const slime = JSON.parse(text('slime-rollout-3.json'));
  const slimeWith = (g: unknown) => enc(JSON.stringify({ ...slime, samples: slime.samples.map((s: object, b: number) => (b === 0 ? { ...s, group_index: g } : s)) }));

  it('slime group_index "a": refused naming the sample and field (it used to make one group of the whole batch)', () => {
    expect(refusal(slimeWith('a'), 'slime.json')).toMatch(/samples\[0\]\.group_index \(sample 0\) is "a", not an integer/);
  });

  it('slime group_index as a numeric string is the integer, as intOf reads one elsewhere', () => {
    const asString = readAnyBatch(slimeWith(String(slime.samples[0].group_index)), 'slime.json').batch;
    const asNumber = readAnyBatch(enc(text('slime-rollout-3.json')), 'slime.json').batch;
    expect(asString.group_ids).toEqual(asNumber.group_ids);
    expect(asString.num_generations).toBe(asNumber.num_generations);
  });

  const verlConfig = JSON.parse(metaOf('verl-interleaved.safetensors').config);
  const verlWith = (n: unknown) => editSafetensors(fixture('verl-interleaved.safetensors'), { config: JSON.stringify({ ...verlConfig, rollout_n: n }) });

  it('verl rollout_n "x": refused naming it (it used to be ignored for the largest uid group)', () => {
    expect(refusal(verlWith('x'), 'verl.safetensors')).toContain('__metadata__ config.rollout_n = "x" is not a group size');
  });

  it('verl rollout_n nested as verl holds it, 0: refused naming its path', () => {
    const { rollout_n: _, ...rest } = verlConfig;
    const bytes = editSafetensors(fixture('verl-interleaved.safetensors'), { config: JSON.stringify({ ...rest, actor_rollout_ref: { rollout: { n: 0 } } }) });
    expect(refusal(bytes, 'verl.safetensors')).toContain('config.actor_rollout_ref.rollout.n = 0 is not a group size');
  });

  it('verl rollout_n "3" is 3, as the reader\'s intOf reads the other counts', () => {
    expect(readAnyBatch(verlWith(String(verlConfig.rollout_n)), 'verl.safetensors').batch.num_generations).toBe(verlConfig.rollout_n);
  });
});

describe('a file clearly of one format is read by its reader, which names the broken field', () => {
  it('prime-rl with token_ids 5 on line 1: "token_ids must be a list", not "not valid JSON"', () => {
    const lines = text('prime-rl-short-loss-mask.jsonl').split('\n');
    lines[0] = JSON.stringify({ ...JSON.parse(lines[0]), token_ids: 5 });
    expect(refusal(enc(lines.join('\n')), 'rank_0.jsonl')).toMatch(/record 0: token_ids must be a list, got number$/);
  });

  for (const [what, samples] of [['[]', []], ['{}', {}]] as const) {
    it(`slime with samples ${what}: names "samples", not grpo-batch's "format"`, () => {
      const m = refusal(enc(JSON.stringify({ rollout_id: 3, samples })), 'rollout_3.json');
      expect(m).toMatch(/"samples" must be a non-empty list of Sample dicts/);
      expect(m).not.toMatch(/format/);
    });
  }
});

describe('prime-rl records with no trained token', () => {
  const records = text('prime-rl-short-loss-mask.jsonl').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const untrained = (r: { loss_mask: boolean[] }) => ({ ...r, loss_mask: r.loss_mask.map(() => false) });
  const doctor = (r: ImportResult) => diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred)).findings;

  it('every loss_mask false: no EOS "inferred from 0 of 0", and no error finding resting on a guess', () => {
    const r = readAnyBatch(enc(records.map((x) => JSON.stringify(untrained(x))).join('\n')), 'rank_0.jsonl');
    expect(r.notes.join('\n')).not.toMatch(/of 0 trained spans/);
    expect(r.notes.join('\n')).toMatch(/none can be inferred/);
    expect(r.inferred?.eos_token_ids).toMatch(/stand-in, not inferred/);
    // Where each prompt ends is not recorded: no prompt is made empty by a guessed split.
    expect(r.batch.prompt_ids.every((p) => p.length > 0)).toBe(true);
    const errors = doctor(r).filter((f) => f.severity === 'error');
    expect(errors.map((f) => f.rule)).not.toContain('prompt-padding-side');
    // The file's own defect (record 2: a loss_mask shorter than its token_ids) is still named.
    const short = records.findIndex((x) => x.loss_mask.length < x.token_ids.length);
    expect(short).toBeGreaterThanOrEqual(0);
    expect(errors.some((f) => f.rule === 'mask-length-mismatch' && f.message.startsWith(`sample ${short}:`))).toBe(true);
  });

  it('one untrained record among trained ones: all prompt, nothing trained, the EOS voted by the others', () => {
    const rows = records.map((x, b) => (b === 0 ? untrained(x) : x));
    const r = readAnyBatch(enc(rows.map((x) => JSON.stringify(x)).join('\n')), 'rank_0.jsonl');
    expect(r.batch.prompt_ids[0]).toEqual(records[0].token_ids);
    expect(r.batch.completion_ids[0]).toEqual([]);
    expect(r.inferred?.eos_token_ids).toMatch(/inferred from the last trained token/);
    expect(doctor(r).filter((f) => f.severity === 'error' && f.rule === 'prompt-padding-side')).toEqual([]);
  });
});
