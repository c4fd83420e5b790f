// The page's default step settings cut down for a test runner on the tiny model: the first two prompts, G
// completions of at most `max_new_tokens` tokens, and (with `lengthReward`) a length reward besides the task's,
// since a random model earns no task reward and a flat reward gives zero advantages and a zero gradient.
// `config` (TRL names) are the test's edits over the default task's preset and the sampling form, resolved as the
// page resolves them (the sampler's rows, G, max_completion_length, temperature, are the sampling's).
import { DEFAULT_SETTINGS } from '../../src/store/settings.ts';
import type { SamplingSettings, StepSettings } from '../../src/bridge/protocol.ts';
import { noEdits, pageSettings } from '../../src/bridge/settings.ts';
import type { TrainerId } from '../../src/grpo/settings/types.ts';

/** The page's settings for the prompt set under `trainer` with these edits (config / run in its names) and that sampling form. */
export function pageSettingsWith(edits: { config?: Record<string, unknown>; run?: Record<string, unknown> } = {}, trainer: TrainerId = 'trl', sampling: SamplingSettings = DEFAULT_SETTINGS.sampling) {
  const e = noEdits();
  e[trainer] = { config: edits.config ?? {}, run: edits.run ?? {} };
  return pageSettings(trainer, { kind: 'prompts', sampling }, e);
}

export function smallSettings(num_generations: number, max_new_tokens: number, lengthReward = true, edits: { config?: Record<string, unknown>; run?: Record<string, unknown> } = {}, trainer: TrainerId = 'trl'): StepSettings {
  const { prompts, rewards } = DEFAULT_SETTINGS;
  const sampling = { ...DEFAULT_SETTINGS.sampling, num_generations, max_new_tokens };
  const s: StepSettings = structuredClone({ prompts: prompts.slice(0, 2), sampling, rewards, settings: pageSettingsWith(edits, trainer, sampling) });
  if (lengthReward) s.rewards = [...s.rewards, { kind: 'length', name: 'length', weight: 1, enabled: true, target_tokens: 2 }];
  return s;
}
