// One batch, one answer: a verl dump's settings read the same whichever way its hook wrote the config: the table's
// leaf names, verl's nested config (OmegaConf.to_container), or the same paths as dotted keys (a flattened dict,
// "actor_rollout_ref.rollout.temperature": 0.7). Two forms of one setting that disagree are one line naming both.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BatchFormatError } from '../../src/io/batch.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { specOf } from '../../src/grpo/settings/table.ts';
import { VERL_SETTINGS } from '../../src/grpo/settings/verl.ts';
import { nest } from '../helpers/dump_parts.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';

const FIXTURE = new Uint8Array(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures/formats/verl-interleaved.safetensors')));

/** Settings away from verl's defaults, by leaf name. */
const LEAVES: Record<string, unknown> = { temperature: 0.7, loss_agg_mode: 'seq-mean-token-mean', clip_ratio: 0.1, use_kl_loss: true, kl_loss_coef: 0.05, norm_adv_by_std_in_grpo: false, 'optim.clip_grad': 0.5 };
/** Each leaf at its path in verl's config (the table's SettingSpec.path), and rollout.n (the group size). */
const PATHS: Record<string, unknown> = { ...Object.fromEntries(Object.entries(LEAVES).map(([k, v]) => [specOf(VERL_SETTINGS, k).path!, v])), 'actor_rollout_ref.rollout.n': 3 };

const dump = (config: Record<string, unknown>) => editSafetensors(FIXTURE, { config: JSON.stringify(config) });
const read = (config: Record<string, unknown>) => readAnyBatch(dump(config), 'verl.safetensors');

function refusal(config: Record<string, unknown>): string {
  try {
    read(config);
  } catch (e) {
    expect(e).toBeInstanceOf(BatchFormatError);
    return (e as Error).message;
  }
  throw new Error('not refused');
}

describe('verl config: leaf names, nested paths and dotted paths are one setting', () => {
  const flat = read({ ...LEAVES, rollout_n: 3 });

  it('every key dotted reads as the nested form, and as the leaf names', () => {
    const nested = read(nest(PATHS));
    const dotted = read(PATHS);
    expect(dotted.batch.config).toEqual(nested.batch.config);
    expect(dotted.batch.config).toEqual(flat.batch.config);
    expect(dotted.batch.num_generations).toBe(3);
    for (const [k, v] of Object.entries(LEAVES)) expect(dotted.batch.config?.[k]).toEqual(v);
  });

  it('a dotted temperature beside leaf-named settings is the step\'s temperature (not 1)', () => {
    const r = read({ rollout_n: 3, 'actor_rollout_ref.rollout.temperature': 0.7 });
    expect(effectiveSettings('verl', [fileLayer(r.batch, 'verl.safetensors')]).config.temperature).toBe(0.7);
    expect(r.batch.config).toEqual(read({ rollout_n: 3, temperature: 0.7 }).batch.config);
    expect(r.batch.config).not.toHaveProperty(['actor_rollout_ref.rollout.temperature']);
  });

  it('a dotted prefix holding an object is the nested form too', () => {
    expect(read({ 'actor_rollout_ref.rollout': { n: 3, temperature: 0.7 } }).batch.config).toEqual(read(nest({ 'actor_rollout_ref.rollout.n': 3, 'actor_rollout_ref.rollout.temperature': 0.7 })).batch.config);
  });

  it('a row whose own name has dots (optim.clip_grad) is that row, not a path', () => {
    expect(read({ 'optim.clip_grad': 0.5 }).batch.config?.['optim.clip_grad']).toBe(0.5);
  });

  it('dotted and nested forms of one path that disagree: one line naming both', () => {
    const m = refusal({ ...nest({ 'actor_rollout_ref.rollout.temperature': 0.7 }), 'actor_rollout_ref.rollout.temperature': 0.8 });
    expect(m).toMatch(/config\.actor_rollout_ref\.rollout\.temperature = 0\.7 and config\["actor_rollout_ref\.rollout\.temperature"\] = 0\.8/);
    expect(m).not.toContain('\n');
  });

  it('a dotted path and the leaf name that disagree: one line naming both', () => {
    const m = refusal({ temperature: 0.7, 'actor_rollout_ref.rollout.temperature': 0.8 });
    expect(m).toMatch(/config\.temperature = 0\.7 and config\["actor_rollout_ref\.rollout\.temperature"\] = 0\.8 both set temperature/);
  });

  it('forms that agree are one value', () => {
    expect(read({ temperature: 0.7, 'actor_rollout_ref.rollout.temperature': 0.7, ...nest({ 'actor_rollout_ref.rollout.temperature': 0.7 }) }).batch.config?.temperature).toBe(0.7);
  });
});
