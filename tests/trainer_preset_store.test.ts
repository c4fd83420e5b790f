// The trainer preset in the page's store (src/store/settings.ts) and its mapping (src/worker/settings.ts):
// persisted like the other settings; for TRL one value per field the loss panel also has (an edit through
// the preset lands in LossSettings, a value LossSettings cannot hold stays in the preset); defaults are no
// setting; another trainer starts from its table's defaults; an imported batch's config fills the preset.
import { describe, expect, it } from 'vitest';
import type { StateStorage } from 'zustand/middleware';
import { createStudioStore } from '../src/store/index.ts';
import { DEFAULT_LOSS } from '../src/store/settings.ts';
import { presetOfBatch, trainerConfigOf, trainerOfFormat } from '../src/worker/settings.ts';

function memoryStorage(): StateStorage {
  const data = new Map<string, string>();
  return { getItem: (k) => data.get(k) ?? null, setItem: (k, v) => void data.set(k, v), removeItem: (k) => void data.delete(k) };
}

describe('trainer preset', () => {
  it('defaults to TRL at the loss settings, and TRL fields the loss panel has are one value', () => {
    const s = createStudioStore(memoryStorage());
    expect(s.getState().trainer).toEqual({ trainer: 'trl', config: {}, run: {} });
    s.getState().setTrainerField('config', 'beta', 0.1);
    expect(s.getState().loss.beta).toBe(0.1);
    expect(s.getState().trainer.config).toEqual({});
    s.getState().setTrainerField('config', 'loss_type', 'cispo'); // not a studio aggregation: the preset keeps it
    expect(s.getState().trainer.config).toEqual({ loss_type: 'cispo' });
    expect(s.getState().loss.loss_type).toBe(DEFAULT_LOSS.loss_type);
    expect(trainerConfigOf(s.getState().trainer, s.getState().loss)).toMatchObject({ loss_type: 'cispo', beta: 0.1, epsilon: DEFAULT_LOSS.epsilon_low });
    s.getState().setTrainerField('config', 'loss_type', 'bnpo');
    expect(s.getState().trainer.config).toEqual({});
    expect(s.getState().loss.loss_type).toBe('bnpo');
    s.getState().setTrainerField('config', 'top_entropy_quantile', 0.5);
    s.getState().setTrainerField('run', 'num_processes', 2);
    expect(s.getState().trainer).toEqual({ trainer: 'trl', config: { top_entropy_quantile: 0.5 }, run: { num_processes: 2 } });
    s.getState().setTrainerField('config', 'top_entropy_quantile', 1); // TRL's default: no longer a setting
    expect(s.getState().trainer.config).toEqual({});
  });

  it('another trainer starts from its defaults and is persisted', () => {
    const storage = memoryStorage();
    const a = createStudioStore(storage);
    a.getState().setTrainerField('run', 'num_processes', 4);
    a.getState().setTrainer('verl');
    expect(a.getState().trainer).toEqual({ trainer: 'verl', config: {}, run: {} });
    a.getState().setTrainerField('config', 'loss_mode', 'gspo');
    a.getState().setTrainerField('config', 'loss_agg_mode', 'token-mean'); // verl's default
    expect(trainerConfigOf(a.getState().trainer, a.getState().loss)).toEqual({ loss_mode: 'gspo' });
    expect(createStudioStore(storage).getState().trainer).toEqual({ trainer: 'verl', config: { loss_mode: 'gspo' }, run: {} });
  });

  it("an imported batch's config fills the preset: trainer settings to config, run context to run", () => {
    expect(trainerOfFormat('verl')).toBe('verl');
    expect(trainerOfFormat('openrlhf')).toBe('openrlhf');
    expect(trainerOfFormat('grpo-batch')).toBe('trl');
    const config = { loss_type: 'dapo', beta: 0.04, use_vllm: true, vllm_importance_sampling_mode: 'token_mask', gradient_accumulation_steps: 2, num_items_in_batch: 40, output_dir: 'out' };
    expect(presetOfBatch('trl', config)).toEqual({
      trainer: 'trl',
      config: { use_vllm: true, vllm_importance_sampling_mode: 'token_mask' }, // loss_type and beta go to the loss panel
      run: { gradient_accumulation_steps: 2, num_items_in_batch: 40 },
    });
    // A value the table refuses is kept as written: the loss names it, never a silent default.
    expect(presetOfBatch('trl', { vllm_importance_sampling_mode: 'tokenmask' }).config).toEqual({ vllm_importance_sampling_mode: 'tokenmask' });
    expect(presetOfBatch('verl', { loss_mode: 'gspo', clip_ratio_c: 10, dp_size: 2 })).toEqual({ trainer: 'verl', config: { loss_mode: 'gspo', clip_ratio_c: 10 }, run: { dp_size: 2 } });
  });
});
