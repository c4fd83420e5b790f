// The page's default step settings cut down for a test runner on the tiny model: the first two prompts, G
// completions of at most `max_new_tokens` tokens, and (with `lengthReward`) a length reward besides the task's,
// since a random model earns no task reward and a flat reward gives zero advantages and a zero gradient.
import { DEFAULT_SETTINGS } from '../../src/store/settings.ts';
import type { StepSettings } from '../../src/worker/protocol.ts';

export function smallSettings(num_generations: number, max_new_tokens: number, lengthReward = true): StepSettings {
  const s: StepSettings = structuredClone({ ...DEFAULT_SETTINGS, prompts: DEFAULT_SETTINGS.prompts.slice(0, 2) });
  s.sampling = { ...s.sampling, num_generations, max_new_tokens };
  if (lengthReward) s.rewards = [...s.rewards, { kind: 'length', name: 'length', weight: 1, enabled: true, target_tokens: 2 }];
  return s;
}
