// The batch `config` checked field by field before anything reads it: a wrong type or a value out of range
// (`scale_rewards: "median"`, `temperature: "1.0"`) is an error naming the field, never a silent default
// or a string coerced into arithmetic. Seam: these are the fields the step and score read today; once the
// trainer settings table (src/grpo/settings/table.ts, SettingSpec) lands, validateConfig checks every field
// against it instead and this list goes away. Unknown keys are kept and not checked (exporters add their own).
import { AGGREGATIONS, KL_ESTIMATORS } from '../kernels/types.ts';

type Check = (v: unknown) => string | undefined;

const num = (ok: (x: number) => boolean, what: string): Check => (v) => (typeof v === 'number' && Number.isFinite(v) && ok(v) ? undefined : `expected ${what}`);
const oneOf = (values: readonly (string | boolean)[]): Check => (v) => (values.includes(v as string) ? undefined : `expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}`);
const nullable = (check: Check): Check => (v) => (v === null ? undefined : check(v));
const kind = (type: 'string' | 'object'): Check => (v) => (typeof v === type && v !== null && !Array.isArray(v) ? undefined : `expected ${type === 'object' ? 'an object' : 'a string'}`);

const positiveInt = num((x) => Number.isInteger(x) && x > 0, 'a positive integer');

/** Field → check, for the config fields read by the step, score and the Doctor. */
const CONFIG_CHECKS: Record<string, Check> = {
  loss_type: oneOf(AGGREGATIONS),
  beta: num((x) => x >= 0, 'a number ≥ 0'),
  epsilon: num((x) => x >= 0 && x < 1, 'a number in [0, 1)'),
  epsilon_high: nullable(num((x) => x >= 0, 'null or a number ≥ 0')),
  delta: nullable(num((x) => x > 0, 'null or a number > 0')),
  temperature: num((x) => x > 0, 'a number > 0'),
  kl_estimator: oneOf(KL_ESTIMATORS),
  importance_sampling_level: oneOf(['token', 'sequence']),
  scale_rewards: oneOf(['group', 'batch', 'none', true, false]),
  advantage_estimator: oneOf(['trl', 'verl']),
  max_completion_length: positiveInt,
  max_prompt_length: positiveInt,
  num_items_in_batch: nullable(num((x) => x > 0, 'null or a number > 0')),
  max_grad_norm: num((x) => x > 0, 'a number > 0'),
  position_ids: oneOf(['from_attention_mask', 'arange']),
  model_type: kind('string'),
  chat_template_kwargs: kind('object'),
  optimizer: kind('object'),
};

/** [field, one-line message] for every config value that cannot be used; [] for a usable (or absent) config. */
export function validateConfig(config: Record<string, unknown> | undefined): [string, string][] {
  if (!config) return [];
  const out: [string, string][] = [];
  for (const [key, check] of Object.entries(CONFIG_CHECKS)) {
    if (!(key in config) || config[key] === undefined) continue;
    const problem = check(config[key]);
    if (problem) out.push([`config.${key}`, `config.${key} = ${JSON.stringify(config[key]) ?? String(config[key])}: ${problem}`]);
  }
  return out;
}
