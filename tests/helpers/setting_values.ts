// A valid value of a settings-table row that is not its default, from the row's own type, bounds and allowed
// values (strings, lists and objects: values the trainers parse), for the tests that walk every row of every table.
import type { SettingSpec } from '../../src/grpo/settings/types.ts';

export function otherValue(s: SettingSpec): unknown {
  const d = s.default;
  switch (s.type) {
    case 'boolean':
      return !d;
    case 'enum':
      return s.values!.find((v) => v !== d);
    case 'string':
      // verl's rollout_rs / rollout_rs_threshold / adv_estimator: values verl parses (rollout_corr_helper.py, core_algos.py).
      return { optim: 'sgd', lr_scheduler_type: 'constant', rollout_rs: 'token_k1', rollout_rs_threshold: '0.5_2', adv_estimator: 'grpo' }[s.name] ?? 'x';
    case 'number-list':
      // AdamW betas (verl's betas, OpenRLHF's actor.adam.betas): each in [0, 1), not the default.
      if (s.name.endsWith('betas')) return JSON.stringify(d) === '[0.9,0.95]' ? [0.8, 0.99] : [0.9, 0.95];
      return [0.5, 2];
    case 'object':
      // OpenRLHF's loss_batch_info is _optimizer_step_loss_norm's {dp_size, batch_num_tokens, global_batch_size}.
      // verl's model.override_config: a dropout key (any other key is refused).
      if (s.name === 'model.override_config') return { attention_dropout: 0 };
      return s.name === 'loss_batch_info' ? { dp_size: 2, batch_num_tokens: 12, global_batch_size: 3 } : { num_cycles: 0.25 };
    case 'integer':
    case 'number': {
      const step = s.type === 'integer' ? 1 : 0.5;
      const base = typeof d === 'number' ? d : (s.min ?? 0);
      const up = base + step;
      if (s.max === undefined || up < s.max || (up === s.max && !s.exclusive)) return up;
      return s.type === 'integer' ? base - 1 : (base + (s.min ?? 0)) / 2;
    }
  }
}
