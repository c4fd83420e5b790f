// The settings slices: prompt set, sampling, rewards, the trainer and the user's setting edits. These are
// what the user types, so they are the only slices persisted to local storage (src/store/index.ts) and
// survive a reload. The loss / advantage / optimizer settings are NOT held here as values: the store keeps
// the user's edits (per trainer, in its own names) and derives the effective settings of the next update
// from them over its base (src/store/derived.ts effectiveOf: the default task's preset, or the imported
// batch's own settings), so nothing an earlier import set is carried into another batch.
import type { StateCreator } from 'zustand';
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROBLEMS, DEFAULT_REWARDS as TASK_REWARDS, additionAnswer, additionQuestion } from '../grpo/default_task.ts';
import type { RewardKind, RewardSpec } from '../grpo/rewards.ts';
import type { PromptItem, SamplingSettings } from '../worker/protocol.ts';
import { DEFAULT_SAMPLING, noEdits, type SettingsEdits } from '../worker/settings.ts';
import type { TrainerId } from '../grpo/settings/types.ts';

export interface SettingsSlice {
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  /** The trainer whose objective the loss side follows (an import sets the batch's). */
  trainer: TrainerId;
  /** The user's setting values, per trainer, in its own names: the top layer of the effective settings. */
  edits: SettingsEdits;
  setPrompt(i: number, patch: Partial<PromptItem>): void;
  addPrompt(): void;
  removePrompt(i: number): void;
  setSampling(patch: Partial<SamplingSettings>): void;
  /** Another trainer: its own edits (kept per trainer) over its defaults. */
  setTrainer(trainer: TrainerId): void;
  /** One setting of the current trainer, in its own names (undefined: no edit, the base's value shows through). */
  setSetting(where: 'config' | 'run', name: string, value: unknown): void;
  /** Several config values at once (a what-if applied). */
  editConfig(values: Record<string, unknown>): void;
  /** An import: the batch's trainer, and no edits (the batch's own settings are its base). */
  startFromBatch(trainer: TrainerId): void;
  setReward(i: number, patch: Partial<RewardSpec>): void;
  addReward(kind: RewardKind): void;
  removeReward(i: number): void;
  resetSettings(): void;
}

export const DEFAULT_PROMPTS: PromptItem[] = DEFAULT_PROBLEMS.map((p) => ({ system: '', user: additionQuestion(p), answer: additionAnswer(p) }));

export const DEFAULT_SAMPLING_SETTINGS: SamplingSettings = {
  ...DEFAULT_SAMPLING,
  num_generations: DEFAULT_GRPO_CONFIG.num_generations,
  temperature: DEFAULT_GRPO_CONFIG.temperature ?? 1,
  max_new_tokens: DEFAULT_GRPO_CONFIG.max_completion_length ?? 8,
  seed: 42,
  eos_token_ids: null,
};

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

/** The default task's rewards (correctness, format), as the tiny-adder model was trained to earn them. */
export const DEFAULT_REWARDS: RewardSpec[] = structuredClone([...TASK_REWARDS]);

export const DEFAULT_SETTINGS = { prompts: DEFAULT_PROMPTS, sampling: DEFAULT_SAMPLING_SETTINGS, rewards: DEFAULT_REWARDS, trainer: 'trl' as TrainerId, edits: noEdits() };

/** The keys local storage keeps. */
export const PERSISTED_KEYS = ['prompts', 'sampling', 'rewards', 'trainer', 'edits'] as const;

const without = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([x]) => x !== k));

export const createSettingsSlice: StateCreator<SettingsSlice, [], [], SettingsSlice> = (set) => ({
  ...structuredClone(DEFAULT_SETTINGS),
  setPrompt: (i, patch) => set((s) => ({ prompts: s.prompts.map((p, j) => (j === i ? { ...p, ...patch } : p)) })),
  addPrompt: () => set((s) => ({ prompts: [...s.prompts, { system: '', user: '', answer: '' }] })),
  removePrompt: (i) => set((s) => ({ prompts: s.prompts.filter((_, j) => j !== i) })),
  setSampling: (patch) => set((s) => ({ sampling: { ...s.sampling, ...patch } })),
  setTrainer: (trainer) => set({ trainer }),
  setSetting: (where, name, value) =>
    set((s) => {
      const mine = s.edits[s.trainer];
      const rest = without(mine[where], name);
      return { edits: { ...s.edits, [s.trainer]: { ...mine, [where]: value === undefined ? rest : { ...rest, [name]: value } } } };
    }),
  editConfig: (values) => set((s) => ({ edits: { ...s.edits, [s.trainer]: { ...s.edits[s.trainer], config: { ...s.edits[s.trainer].config, ...values } } } })),
  startFromBatch: (trainer) => set({ trainer, edits: noEdits() }),
  setReward: (i, patch) => set((s) => ({ rewards: s.rewards.map((r, j) => (j === i ? ({ ...r, ...patch } as RewardSpec) : r)) })),
  addReward: (kind) => set((s) => ({ rewards: [...s.rewards, newReward(kind)] })),
  removeReward: (i) => set((s) => ({ rewards: s.rewards.filter((_, j) => j !== i) })),
  resetSettings: () => set(structuredClone(DEFAULT_SETTINGS)),
});
