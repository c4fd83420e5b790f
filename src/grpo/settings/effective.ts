// One resolution of the settings an update runs with, and where each value comes from. The same batch must
// give the same answer on the page and in the CLI whatever was done before, so there is one rule: the
// effective settings are the trainer's table defaults, then the layers in order — the studio's preset (the
// default task's settings, for its own prompt set), the imported file's `config` / `run` (for that file's
// batch only), the user's edits — each later layer winning, every value checked against its row
// (type, bounds, allowed values: SettingsError naming the field). `grpo-studio` resolves a file with
// [file]; the page with [preset] or [file] under the user's [edits]; nothing else carries a value over.
//
// The fields a trainer's batch config may hold are its own table's (trl.ts, verl.ts, openrlhf.ts) plus the
// studio's (studio.ts: advantage / position-id policy, model family, the studio's optimizer object) and
// TRL's scale_rewards for verl and OpenRLHF (each has its own optimizer rows: verl's actor.optim.* and grad_clip,
// OpenRLHF's actor.adam.*, actor.lr_scheduler, actor.max_norm): configTable(). A run-context key a
// layer holds in `config` (the importers put rank / num_processes / gradient_accumulation_steps there, as
// TRL's args do) is a run value. Keys no table knows are kept, unchecked, with their provenance (exporters
// add their own), and listed by unknownKeys().
import { AGGREGATIONS, TRL_LOSS_TYPES } from '../../kernels/types.ts';
import { checkSetting, type SettingsTable } from './table.ts';
import { STUDIO_SETTINGS } from './studio.ts';
import { TRAINER_TABLES } from './trainers.ts';
import { TRL_SETTINGS } from './trl.ts';
import type { SettingSpec, TrainerId } from './types.ts';

/** Where a value comes from: the trainer's default, the studio's preset, a file, or the user. */
export type Origin = 'default' | 'preset' | 'file' | 'edited';

export interface Provenance {
  origin: Origin;
  /** The file's name (origin file) or the preset's (origin preset). */
  label?: string;
}

/** One layer of values: a preset, a file's config / run, or the user's edits, in the trainer's own names. */
export interface SettingsLayer {
  origin: Exclude<Origin, 'default'>;
  label?: string;
  /**
   * The trainer whose names the layer is written in (absent: the trainer resolved). Under another trainer only
   * its trainer-independent values apply (the studio's rows, the optimizer's and reward scaling's): a TRL
   * file's loss_type is not verl's loss_type.
   */
  trainer?: TrainerId;
  config?: Record<string, unknown>;
  run?: Record<string, unknown>;
}

/** The settings one update runs with: the values the layers set (a key absent takes its row's default). */
export interface EffectiveSettings {
  trainer: TrainerId;
  config: Record<string, unknown>;
  run: Record<string, unknown>;
  /** `config.<name>` / `run.<name>` → the layer that set it; a key not listed is the table's default. */
  provenance: Record<string, Provenance>;
}

/** The studio's aggregations are valid TRL loss types for its own loss (verl's loss_agg_mode names). */
const TRL_CONFIG: SettingsTable = TRL_SETTINGS.map((s) => (s.name === 'loss_type' ? { ...s, values: [...TRL_LOSS_TYPES, ...AGGREGATIONS.filter((a) => !(TRL_LOSS_TYPES as readonly string[]).includes(a))] } : s));

/**
 * TRL rows the studio's advantages read beside another trainer's objective: scale_rewards. The optimizer step is each
 * trainer's own (the optimizer rows of src/grpo/settings/verl.ts and openrlhf.ts).
 */
const sharedTrl = (trainer: TrainerId): SettingsTable => (trainer === 'trl' ? [] : TRL_SETTINGS.filter((s) => s.name === 'scale_rewards'));

/** Values that mean the same under this trainer as under any other: the studio's rows and the TRL ones it shares. */
const portableNames = (t: TrainerId): ReadonlySet<string> =>
  new Set([...STUDIO_SETTINGS, ...(t === 'trl' ? TRL_SETTINGS.filter((s) => s.scope === 'optimizer' || s.name === 'scale_rewards') : sharedTrl(t))].map((s) => s.name));
const PORTABLE = { trl: portableNames('trl'), verl: portableNames('verl'), openrlhf: portableNames('openrlhf') } satisfies Record<TrainerId, ReadonlySet<string>>;

/** Every config field a batch of this trainer may set, its own rows first. */
function buildConfigTable(trainer: TrainerId): SettingsTable {
  const own = trainer === 'trl' ? TRL_CONFIG : TRAINER_TABLES[trainer].config;
  const names = new Set(own.map((s) => s.name));
  const extra = [...STUDIO_SETTINGS, ...sharedTrl(trainer)].filter((s) => !names.has(s.name));
  return [...own, ...extra];
}
/** Built once per trainer: rowOf runs for every key of every layer. */
const CONFIG_TABLES = { trl: buildConfigTable('trl'), verl: buildConfigTable('verl'), openrlhf: buildConfigTable('openrlhf') } satisfies Record<TrainerId, SettingsTable>;

/** Every config field a batch of this trainer may set, its own rows first. */
export function configTable(trainer: TrainerId): SettingsTable {
  return CONFIG_TABLES[trainer];
}

export function runTable(trainer: TrainerId): SettingsTable {
  return TRAINER_TABLES[trainer].run;
}

/** The row of `where.name`, or undefined for a key no table of the trainer knows. */
export function rowOf(trainer: TrainerId, where: 'config' | 'run', name: string): SettingSpec | undefined {
  return (where === 'config' ? configTable(trainer) : runTable(trainer)).find((s) => s.name === name);
}

/** Where a layer's key belongs: a config row, else a run row (importers put run context in config), else config. */
function placeOf(trainer: TrainerId, where: 'config' | 'run', name: string): 'config' | 'run' {
  if (where === 'run') return 'run';
  return !rowOf(trainer, 'config', name) && rowOf(trainer, 'run', name) ? 'run' : 'config';
}

/**
 * The settings the layers give, in order (later wins). A value is checked against its row: a bad one is a
 * SettingsError naming the field ("config.beta: …"; the caller names the file), never a silent default.
 * `undefined` in a layer is no value (the layer below shows through).
 */
export function effectiveSettings(trainer: TrainerId, layers: readonly SettingsLayer[]): EffectiveSettings {
  const out: EffectiveSettings = { trainer, config: {}, run: {}, provenance: {} };
  for (const layer of layers) {
    const foreign = layer.trainer !== undefined && layer.trainer !== trainer;
    for (const where of ['config', 'run'] as const) {
      for (const [name, raw] of Object.entries(layer[where] ?? {})) {
        if (raw === undefined || (foreign && !PORTABLE[trainer].has(name))) continue;
        const place = placeOf(trainer, where, name);
        const spec = rowOf(trainer, place, name);
        const value = spec ? checkSetting(spec, normalised(spec, raw), place) : raw;
        out[place][name] = value;
        out.provenance[`${place}.${name}`] = { origin: layer.origin, ...(layer.label ? { label: layer.label } : {}) };
      }
    }
  }
  return out;
}

/** GRPOConfig.__post_init__'s rewrite of the legacy boolean scale_rewards (true = group, false = none). */
function normalised(spec: SettingSpec, v: unknown): unknown {
  if (spec.name === 'scale_rewards' && typeof v === 'boolean') return v ? 'group' : 'none';
  return v;
}

/** A batch's own settings as a layer: its `config` and `run`, named by the file (structural: any GrpoBatch). */
export function fileLayer(batch: { trainer?: TrainerId; config?: Record<string, unknown>; run?: Record<string, unknown> }, name: string): SettingsLayer {
  return { origin: 'file', label: name, trainer: trainerOfBatch(batch), config: batch.config ?? {}, run: batch.run ?? {} };
}

/** The trainer a batch follows: its `trainer` field (set by the verl / OpenRLHF readers), else TRL. */
export function trainerOfBatch(batch: { trainer?: TrainerId }): TrainerId {
  return batch.trainer ?? 'trl';
}

/** The value of `where.name` (its row's default when no layer set it) and where it comes from. */
export function settingOf(s: EffectiveSettings, where: 'config' | 'run', name: string): { value: unknown; provenance: Provenance } {
  const key = `${where}.${name}`;
  if (key in s.provenance) return { value: s[where][name], provenance: s.provenance[key] };
  return { value: rowOf(s.trainer, where, name)?.default ?? null, provenance: { origin: 'default' } };
}

/** Keys the layers set that no table of the trainer knows (kept as given; listed so nothing is silently ignored). */
export function unknownKeys(s: EffectiveSettings): string[] {
  return (['config', 'run'] as const).flatMap((where) => Object.keys(s[where]).filter((k) => !rowOf(s.trainer, where, k)).map((k) => `${where}.${k}`));
}

/** One line per value that differs between two resolutions ("config.beta: 0.04 (preset) → 0 (from a.json)"). */
export function settingsChanges(before: EffectiveSettings, after: EffectiveSettings): string[] {
  const text = (x: { value: unknown; provenance: Provenance }) => `${JSON.stringify(x.value)} (${x.provenance.origin === 'file' ? `from ${x.provenance.label ?? 'file'}` : x.provenance.origin})`;
  if (before.trainer !== after.trainer) return [`trainer: ${before.trainer} → ${after.trainer}`];
  const keys = new Set([...Object.keys(before.provenance), ...Object.keys(after.provenance)]);
  const out: string[] = [];
  for (const key of [...keys].sort()) {
    const [where, name] = [key.slice(0, key.indexOf('.')) as 'config' | 'run', key.slice(key.indexOf('.') + 1)];
    const a = settingOf(before, where, name);
    const b = settingOf(after, where, name);
    if (JSON.stringify(a.value) !== JSON.stringify(b.value)) out.push(`${key}: ${text(a)} → ${text(b)}`);
  }
  return out;
}
