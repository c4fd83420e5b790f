// The settings slices: prompt set, sampling, rewards, and for each base of an update — the page's own prompt
// set, and an imported batch — its trainer and the user's setting edits. The prompt set's are what the user
// types for the studio's own task, so they are persisted to local storage (src/store/index.ts) and survive a
// reload; an imported batch's start empty with each import and go with it. The loss / advantage / optimizer
// settings are NOT held here as values: the effective settings of the next update are derived from the base's
// edits over its own settings (src/store/derived.ts effectiveOf: the chosen task's preset, or the imported
// batch's `config` / `run`), so nothing an earlier import or the other base set is carried over, and nothing
// the user entered for the prompt set is lost by importing a batch.
import type { StateCreator } from 'zustand';
import { DEFAULT_TASK, TASKS, type TaskId } from '../grpo/tasks.ts';
import type { RewardKind, RewardSpec } from '../grpo/rewards.ts';
import type { PromptItem, SamplingSettings, ToolSettings } from '../bridge/protocol.ts';
import { DEFAULT_SAMPLING, noEdits, samplerRows, samplerValue, type SettingsEdits } from '../bridge/settings.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import { trainerOfBatch } from '../grpo/settings/effective.ts';
import type { BatchSlice } from './session.ts';

export interface SettingsSlice {
  /** The embedded task the prompt set came from (src/grpo/tasks.ts): its model is the one loaded by default. */
  task: TaskId;
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  /** The prompt set's tools: a multi-turn rollout (the tool task's), or null for one turn per completion. */
  tools: ToolSettings | null;
  /** The prompt set's trainer (whose objective the loss side follows) and the user's values, per trainer, in its own names. */
  trainer: TrainerId;
  edits: SettingsEdits;
  /** The imported batch's: its trainer (from its format) and the user's values on it; reset by each import. */
  batchTrainer: TrainerId;
  batchEdits: SettingsEdits;
  setPrompt(i: number, patch: Partial<PromptItem>): void;
  addPrompt(): void;
  removePrompt(i: number): void;
  setSampling(patch: Partial<SamplingSettings>): void;
  /** Edits the tools of a multi-turn prompt set (no-op without tools). */
  setTools(patch: Partial<ToolSettings>): void;
  /** Another embedded task: its prompts, sampling, rewards and tools replace the prompt set's, and its preset is the base of the loss settings (the user's edits stay). */
  chooseTask(id: TaskId): void;
  /** Another trainer for that base: its own edits (kept per trainer) over its defaults. */
  setTrainer(base: BaseKind, trainer: TrainerId): void;
  /** One setting of the base's trainer, in its own names (undefined: no edit, the base's value shows through). */
  setSetting(base: BaseKind, where: 'config' | 'run', name: string, value: unknown): void;
  /** The base's trainer and that trainer's whole edits at once (a what-if applied: src/bridge/settings.ts editsReaching). */
  setTrainerEdits(base: BaseKind, trainer: TrainerId, edits: SettingsEdits[TrainerId]): void;
  /** An import: the batch's trainer, and no edits on it (its own settings are its base); the prompt set's stay. */
  startFromBatch(trainer: TrainerId): void;
  setReward(i: number, patch: Partial<RewardSpec>): void;
  addReward(kind: RewardKind): void;
  removeReward(i: number): void;
  /** Defaults: the default task's prompt set and sampling, and no edits on either base (an imported batch's own trainer and settings again). */
  resetSettings(): void;
}

/** A task's prompt set as the page edits it: the system / user messages and the answer of each prompt. */
const promptItems = (id: TaskId): PromptItem[] =>
  TASKS[id].prompts.map((p) => ({ system: p.messages.find((m) => m.role === 'system')?.content ?? '', user: p.messages.find((m) => m.role === 'user')?.content ?? '', answer: p.answer }));

/** A task's sampling: the sampler's defaults with the task's G, temperature and completion budget (seed 42). */
const taskSampling = (id: TaskId): SamplingSettings => ({
  ...DEFAULT_SAMPLING,
  num_generations: TASKS[id].num_generations,
  temperature: TASKS[id].temperature,
  max_new_tokens: TASKS[id].max_completion_length,
  seed: 42,
  eos_token_ids: null,
});

/** A task's tools as the page edits them: TRL's loop since #5242 (concat), a second per call. */
const taskTools = (id: TaskId): ToolSettings | null => {
  const t = TASKS[id].tools;
  return t && { schemas: structuredClone(t.schemas), source: t.source, way: 'concat', max_tool_calling_iterations: t.max_tool_calling_iterations, timeout_ms: 1000 };
};

/** What choosing a task sets. */
export const taskSettings = (id: TaskId) => ({ task: id, prompts: promptItems(id), sampling: taskSampling(id), rewards: structuredClone([...TASKS[id].rewards]) as RewardSpec[], tools: taskTools(id) });

export const DEFAULT_PROMPTS: PromptItem[] = promptItems(DEFAULT_TASK);
export const DEFAULT_SAMPLING_SETTINGS: SamplingSettings = taskSampling(DEFAULT_TASK);

/** The source a new JS reward starts with: exact match after dropping trailing special-token text. */
export const JS_REWARD_TEMPLATE = "(s) => (s.completion.replace(/(\\s*<\\|?[^<>\\s]+\\|?>)+\\s*$/, '').trim() === s.answer.trim() ? 1 : 0)";

/** A fresh reward of each kind, as "add reward" creates it. */
export function newReward(kind: RewardKind): RewardSpec {
  const base = { name: kind, weight: 1, enabled: true };
  switch (kind) {
    case 'exact_match':
      return { ...base, kind, normalize: true };
    case 'regex':
      return { ...base, kind, pattern: '^\\s*\\d+\\s*$', flags: '' };
    case 'length':
      return { ...base, kind, target_tokens: 4 };
    case 'contains':
      return { ...base, kind, text: '', case_sensitive: false };
    case 'js':
      // completion texts keep the EOS token's text ("59<|im_end|>"): the template strips trailing special tokens
      // before comparing, as the built-in exact match does, or it would score 0 on every correct answer.
      return { ...base, kind, source: JS_REWARD_TEMPLATE, timeout_ms: 1000 };
  }
}

export const DEFAULT_SETTINGS = { ...taskSettings(DEFAULT_TASK), trainer: 'trl' as TrainerId, edits: noEdits() };

/** An update's base: the page's own prompt set, or the imported batch. */
export type BaseKind = 'prompts' | 'batch';

/** The state keys of a base's trainer and edits. */
const KEYS = { prompts: { trainer: 'trainer', edits: 'edits' }, batch: { trainer: 'batchTrainer', edits: 'batchEdits' } } as const;

/** The keys local storage keeps (`panels`: the side panels' widths, src/store/layout.ts). */
export const PERSISTED_KEYS = ['task', 'prompts', 'sampling', 'rewards', 'tools', 'trainer', 'edits', 'panels'] as const;

const without = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([x]) => x !== k));

/**
 * The prompt set's edits with the values of sampler rows (a trainer samples with what it scores with:
 * SettingSpec.sampler) moved into its sampling form, `trainer`'s applied (undefined: the task's value back), every
 * trainer's dropped from the edits: the prompt set holds each such value once. A value the sampler has no field
 * value for (max_completion_length None: no cap) stays an edit, which the settings then refuse naming it
 * (src/bridge/settings.ts samplerOf), rather than being dropped.
 */
export function withSamplerEdits(s: Pick<SettingsSlice, 'task' | 'trainer' | 'sampling' | 'edits'>): Pick<SettingsSlice, 'sampling' | 'edits'> {
  const sampling = { ...s.sampling };
  const edits = { ...s.edits };
  for (const t of Object.keys(edits) as TrainerId[]) {
    const config = { ...edits[t].config };
    for (const row of samplerRows(t)) {
      if (!(row.name in config)) continue;
      const v = config[row.name] === undefined ? taskSampling(s.task)[row.sampler] : samplerValue(row, config[row.name]);
      if (t === s.trainer && v === undefined) continue;
      if (t === s.trainer) Object.assign(sampling, { [row.sampler]: v });
      delete config[row.name];
    }
    edits[t] = { ...edits[t], config };
  }
  return { sampling, edits };
}

/** The settings slice reads the imported batch (the session's) for what Defaults restores: that batch's own trainer. */
export const createSettingsSlice: StateCreator<SettingsSlice & Pick<BatchSlice, 'imported'>, [], [], SettingsSlice> = (set) => ({
  ...structuredClone(DEFAULT_SETTINGS),
  batchTrainer: 'trl',
  batchEdits: noEdits(),
  setPrompt: (i, patch) => set((s) => ({ prompts: s.prompts.map((p, j) => (j === i ? { ...p, ...patch } : p)) })),
  addPrompt: () => set((s) => ({ prompts: [...s.prompts, { system: '', user: '', answer: '' }] })),
  removePrompt: (i) => set((s) => ({ prompts: s.prompts.filter((_, j) => j !== i) })),
  setSampling: (patch) => set((s) => ({ sampling: { ...s.sampling, ...patch } })),
  setTools: (patch) => set((s) => (s.tools ? { tools: { ...s.tools, ...patch } } : {})),
  chooseTask: (id) => set(taskSettings(id)),
  setTrainer: (base, trainer) => set({ [KEYS[base].trainer]: trainer }),
  setSetting: (base, where, name, value) =>
    set((s) => {
      const { trainer, edits } = KEYS[base];
      const all = s[edits];
      const mine = all[s[trainer]];
      const rest = without(mine[where], name);
      // Over the prompt set a sampler row's value, undefined too (the task's again), is the sampling form's.
      const sampled = base === 'prompts' && where === 'config' && samplerRows(s[trainer]).some((r) => r.name === name);
      const next = { [edits]: { ...all, [s[trainer]]: { ...mine, [where]: value === undefined && !sampled ? rest : { ...rest, [name]: value } } } };
      return sampled ? withSamplerEdits({ ...s, ...next }) : next;
    }),
  setTrainerEdits: (base, trainer, mine) =>
    set((s) => {
      const next = { [KEYS[base].trainer]: trainer, [KEYS[base].edits]: { ...s[KEYS[base].edits], [trainer]: mine } };
      return base === 'prompts' ? { ...next, ...withSamplerEdits({ ...s, ...next }) } : next;
    }),
  startFromBatch: (trainer) => set({ batchTrainer: trainer, batchEdits: noEdits() }),
  setReward: (i, patch) => set((s) => ({ rewards: s.rewards.map((r, j) => (j === i ? ({ ...r, ...patch } as RewardSpec) : r)) })),
  addReward: (kind) => set((s) => ({ rewards: [...s.rewards, newReward(kind)] })),
  removeReward: (i) => set((s) => ({ rewards: s.rewards.filter((_, j) => j !== i) })),
  // Every edit goes, the imported batch's too: its own trainer and settings show through again, as on import.
  resetSettings: () => set((s) => ({ ...structuredClone(DEFAULT_SETTINGS), batchTrainer: s.imported ? trainerOfBatch(s.imported.batch) : 'trl', batchEdits: noEdits() })),
});
