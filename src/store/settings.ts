// The settings slices: prompt set, sampling, rewards and loss. These are what the user types, so they
// are the only slices persisted to local storage (src/store/index.ts) and survive a reload. Defaults are
// the default task's (src/grpo/default_task.ts), so a first visit opens on something that learns.
import type { StateCreator } from 'zustand';
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROBLEMS, DEFAULT_REWARDS as TASK_REWARDS, additionAnswer, additionQuestion } from '../grpo/default_task.ts';
import type { RewardKind, RewardSpec } from '../grpo/rewards.ts';
import type { LossSettings, PromptItem, SamplingSettings } from '../worker/protocol.ts';
import { DEFAULT_SAMPLING } from '../worker/settings.ts';

export interface SettingsSlice {
  prompts: PromptItem[];
  sampling: SamplingSettings;
  rewards: RewardSpec[];
  loss: LossSettings;
  setPrompt(i: number, patch: Partial<PromptItem>): void;
  addPrompt(): void;
  removePrompt(i: number): void;
  setSampling(patch: Partial<SamplingSettings>): void;
  setLoss(patch: Partial<LossSettings>): void;
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
  kl_estimator: DEFAULT_GRPO_CONFIG.kl_estimator ?? 'k3',
  epsilon_low: DEFAULT_GRPO_CONFIG.epsilon ?? 0.2,
  epsilon_high: DEFAULT_GRPO_CONFIG.epsilon_high ?? 0.28,
  delta: null,
  temperature: DEFAULT_GRPO_CONFIG.temperature ?? 1,
  scale_rewards: 'group',
  advantage_estimator: 'trl',
  importance_sampling_level: 'token',
  optimizer: 'adamw',
  lr: DEFAULT_GRPO_CONFIG.learning_rate,
  betas: [0.9, 0.999],
  weight_decay: 0,
  max_grad_norm: DEFAULT_GRPO_CONFIG.max_grad_norm,
  position_ids: 'from_attention_mask',
  max_completion_length: DEFAULT_GRPO_CONFIG.max_completion_length ?? 8,
};

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
      return { ...base, kind, source: '(s) => (s.completion.trim() === s.answer ? 1 : 0)', timeout_ms: 1000 };
  }
}

/** The default task's rewards (correctness, format), as the tiny-adder model was trained to earn them. */
export const DEFAULT_REWARDS: RewardSpec[] = structuredClone([...TASK_REWARDS]);

export const DEFAULT_SETTINGS = { prompts: DEFAULT_PROMPTS, sampling: DEFAULT_SAMPLING_SETTINGS, rewards: DEFAULT_REWARDS, loss: DEFAULT_LOSS };

/** The keys local storage keeps. */
export const PERSISTED_KEYS = ['prompts', 'sampling', 'rewards', 'loss'] as const;

export const createSettingsSlice: StateCreator<SettingsSlice, [], [], SettingsSlice> = (set) => ({
  ...structuredClone(DEFAULT_SETTINGS),
  setPrompt: (i, patch) => set((s) => ({ prompts: s.prompts.map((p, j) => (j === i ? { ...p, ...patch } : p)) })),
  addPrompt: () => set((s) => ({ prompts: [...s.prompts, { system: '', user: '', answer: '' }] })),
  removePrompt: (i) => set((s) => ({ prompts: s.prompts.filter((_, j) => j !== i) })),
  setSampling: (patch) => set((s) => ({ sampling: { ...s.sampling, ...patch } })),
  setLoss: (patch) => set((s) => ({ loss: { ...s.loss, ...patch } })),
  setReward: (i, patch) => set((s) => ({ rewards: s.rewards.map((r, j) => (j === i ? ({ ...r, ...patch } as RewardSpec) : r)) })),
  addReward: (kind) => set((s) => ({ rewards: [...s.rewards, newReward(kind)] })),
  removeReward: (i) => set((s) => ({ rewards: s.rewards.filter((_, j) => j !== i) })),
  resetSettings: () => set(structuredClone(DEFAULT_SETTINGS)),
});
