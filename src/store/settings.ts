// The settings slices: prompt set, sampling, rewards and loss. These are what the user types, so they
// are the only slices persisted to local storage (src/store/index.ts) and survive a reload. Defaults are
// the default task's (src/grpo/default_task.ts), so a first visit opens on something that learns.
import type { StateCreator } from 'zustand';
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROBLEMS, DEFAULT_REWARDS as TASK_REWARDS, additionAnswer, additionQuestion } from '../grpo/default_task.ts';
import type { RewardKind, RewardSpec } from '../grpo/rewards.ts';
import type { LossSettings, PromptItem, SamplingSettings, TrainerPreset } from '../worker/protocol.ts';
import { DEFAULT_SAMPLING, DEFAULT_TRAINER, lossHolds, lossSettingsOf } from '../worker/settings.ts';
import type { TrainerId } from '../grpo/settings/types.ts';
import { TRAINER_TABLES } from '../grpo/settings/trainers.ts';
import { specOf } from '../grpo/settings/table.ts';
import { TRL_SETTINGS } from '../grpo/settings/trl.ts';

/** GRPOConfig's default for a field the default task leaves unset (one table: src/grpo/settings/trl.ts). */
const trlDefault = <T>(name: string) => specOf(TRL_SETTINGS, name).default as T;

export interface SettingsSlice {
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  loss: LossSettings;
  /** The trainer the loss side follows, its config and run context (its own field names). */
  trainer: TrainerPreset;
  setPrompt(i: number, patch: Partial<PromptItem>): void;
  addPrompt(): void;
  removePrompt(i: number): void;
  setSampling(patch: Partial<SamplingSettings>): void;
  setLoss(patch: Partial<LossSettings>): void;
  /** Another trainer: its settings start from its table's defaults. */
  setTrainer(trainer: TrainerId): void;
  /** One preset field (undefined: back to the default). A TRL field LossSettings holds is set there, one value for both forms. */
  setTrainerField(where: 'config' | 'run', name: string, value: unknown): void;
  setPreset(preset: TrainerPreset): void;
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

export const DEFAULT_LOSS: LossSettings = {
  loss_type: DEFAULT_GRPO_CONFIG.loss_type,
  beta: DEFAULT_GRPO_CONFIG.beta ?? 0.04,
  kl_estimator: DEFAULT_GRPO_CONFIG.kl_estimator ?? trlDefault('kl_estimator'),
  epsilon_low: DEFAULT_GRPO_CONFIG.epsilon ?? trlDefault('epsilon'),
  epsilon_high: DEFAULT_GRPO_CONFIG.epsilon_high ?? 0.28,
  delta: null,
  temperature: DEFAULT_GRPO_CONFIG.temperature ?? trlDefault('temperature'),
  scale_rewards: trlDefault('scale_rewards'),
  advantage_estimator: 'trl',
  importance_sampling_level: trlDefault('importance_sampling_level'),
  optimizer: 'adamw',
  lr: DEFAULT_GRPO_CONFIG.learning_rate,
  betas: [0.9, 0.999],
  weight_decay: 0,
  max_grad_norm: DEFAULT_GRPO_CONFIG.max_grad_norm,
  position_ids: 'from_attention_mask',
  max_completion_length: DEFAULT_GRPO_CONFIG.max_completion_length ?? 8,
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

export const DEFAULT_SETTINGS = { prompts: DEFAULT_PROMPTS, sampling: DEFAULT_SAMPLING_SETTINGS, rewards: DEFAULT_REWARDS, loss: DEFAULT_LOSS, trainer: DEFAULT_TRAINER };

/** The keys local storage keeps. */
export const PERSISTED_KEYS = ['prompts', 'sampling', 'rewards', 'loss', 'trainer'] as const;

const without = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([x]) => x !== k));

export const createSettingsSlice: StateCreator<SettingsSlice, [], [], SettingsSlice> = (set) => ({
  ...structuredClone(DEFAULT_SETTINGS),
  setPrompt: (i, patch) => set((s) => ({ prompts: s.prompts.map((p, j) => (j === i ? { ...p, ...patch } : p)) })),
  addPrompt: () => set((s) => ({ prompts: [...s.prompts, { system: '', user: '', answer: '' }] })),
  removePrompt: (i) => set((s) => ({ prompts: s.prompts.filter((_, j) => j !== i) })),
  setSampling: (patch) => set((s) => ({ sampling: { ...s.sampling, ...patch } })),
  setLoss: (patch) => set((s) => ({ loss: { ...s.loss, ...patch } })),
  setTrainer: (trainer) => set({ trainer: { trainer, config: {}, run: {} } }),
  setTrainerField: (where, name, value) =>
    set((s) => {
      const t = s.trainer;
      if (where === 'config' && t.trainer === 'trl' && value !== undefined && lossHolds(name, value)) {
        return { loss: { ...s.loss, ...lossSettingsOf({ [name]: value }) }, trainer: { ...t, config: without(t.config, name) } };
      }
      // A default value is no setting: the preset lists only what differs from the trainer's table.
      const spec = TRAINER_TABLES[t.trainer][where].find((x) => x.name === name);
      const rest = without(t[where], name);
      const isDefault = value === undefined || (spec !== undefined && JSON.stringify(value) === JSON.stringify(spec.default));
      return { trainer: { ...t, [where]: isDefault ? rest : { ...rest, [name]: value } } };
    }),
  setPreset: (trainer) => set({ trainer }),
  setReward: (i, patch) => set((s) => ({ rewards: s.rewards.map((r, j) => (j === i ? ({ ...r, ...patch } as RewardSpec) : r)) })),
  addReward: (kind) => set((s) => ({ rewards: [...s.rewards, newReward(kind)] })),
  removeReward: (i) => set((s) => ({ rewards: s.rewards.filter((_, j) => j !== i) })),
  resetSettings: () => set(structuredClone(DEFAULT_SETTINGS)),
});
