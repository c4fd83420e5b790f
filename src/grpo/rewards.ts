// Reward functions, shared by the studio (in its worker) and the step pipeline in Node. Built-ins follow the usual
// GRPO recipes: exact match against the prompt's answer, regex / format match, a length target, and
// "contains". A user-written JavaScript reward is compiled from its source here; the time limit that
// protects the page from a hanging one is enforced by src/worker/reward_sandbox.ts, which runs it in
// a worker it can terminate. A reward that does not apply returns null → NaN, which TRL's nansum skips.
import { combineRewards } from './advantages.ts';

/** What a reward function sees for one sample. */
export interface RewardSample {
  index: number; // sample i (row of the batch)
  group: number; // ⌊i / G⌋, or the batch's group label (group_ids)
  prompt: string; // rendered prompt text (chat template applied)
  completion: string; // decoded completion text, special tokens skipped (TRL's skip_special_tokens=True)
  answer: string; // the prompt's reference answer ('' if none)
  completion_ids: number[];
}

interface RewardBase {
  name: string;
  weight: number;
  enabled: boolean;
}

export type RewardSpec =
  | (RewardBase & { kind: 'exact_match'; normalize: boolean })
  | (RewardBase & { kind: 'regex'; pattern: string; flags: string })
  | (RewardBase & { kind: 'length'; target_tokens: number })
  | (RewardBase & { kind: 'contains'; text: string; case_sensitive: boolean })
  | (RewardBase & { kind: 'js'; source: string; timeout_ms: number });

export type RewardKind = RewardSpec['kind'];

/** A per-sample reward function: a number, or null where it does not apply. */
export type RewardFn = (s: RewardSample) => number | null;

/** Trim, lowercase, collapse whitespace, drop a trailing period: "The answer is 42." ≈ "the answer is 42". */
function normalizeAnswer(s: string): string {
  return s.trim().toLowerCase().replace(/\s+/g, ' ').replace(/\.$/, '');
}

/** Strips a trailing EOS-like special token text (e.g. "<|im_end|>", "</s>") before comparing. */
function stripTrailingSpecial(s: string): string {
  return s.replace(/(\s*<\|?[^<>\s]+\|?>)+\s*$/, '');
}

/** The built-in reward function for a spec (JS rewards are compiled by compileUserReward). */
export function builtinReward(spec: Exclude<RewardSpec, { kind: 'js' }>): RewardFn {
  switch (spec.kind) {
    case 'exact_match':
      return (s) => {
        if (s.answer === '') return null;
        const c = stripTrailingSpecial(s.completion);
        return (spec.normalize ? normalizeAnswer(c) === normalizeAnswer(s.answer) : c === s.answer) ? 1 : 0;
      };
    case 'regex': {
      let re: RegExp;
      try {
        re = new RegExp(spec.pattern, spec.flags.replace(/g/g, ''));
      } catch (e) {
        throw new RewardDefinitionError(spec.name, `invalid regular expression: ${(e as Error).message}`);
      }
      return (s) => (re.test(s.completion) ? 1 : 0);
    }
    case 'length':
      if (!(spec.target_tokens > 0)) throw new RewardDefinitionError(spec.name, `target_tokens must be > 0, got ${spec.target_tokens}`);
      // 1 at the target length, falling linearly to 0 at 0 tokens and at twice the target.
      return (s) => Math.max(0, 1 - Math.abs(s.completion_ids.length - spec.target_tokens) / spec.target_tokens);
    case 'contains':
      return (s) => {
        const needle = spec.text === '' ? s.answer : spec.text;
        if (needle === '') return null;
        return spec.case_sensitive ? (s.completion.includes(needle) ? 1 : 0) : s.completion.toLowerCase().includes(needle.toLowerCase()) ? 1 : 0;
      };
  }
}

/** A reward definition that cannot be used at all (bad regex, source that is not a function). */
export class RewardDefinitionError extends Error {
  constructor(
    readonly reward: string,
    message: string,
  ) {
    super(`reward "${reward}": ${message}`);
    this.name = 'RewardDefinitionError';
  }
}

/** The value of a user's JS expression (a function, an object of tools), strict mode, a trailing `;` allowed; throws what it throws. */
export function evalUserExpression(source: string): unknown {
  return new Function(`"use strict"; return (${source.trim().replace(/;\s*$/, '')});`)();
}

/**
 * Compiles user source into a reward function. The source is a function expression, e.g.
 *   (s) => s.completion.includes(s.answer) ? 1 : 0
 * or `function reward(s) { … }`. It gets one RewardSample and returns a number (or null: not applicable).
 */
export function compileUserReward(name: string, source: string): RewardFn {
  let fn: unknown;
  try {
    fn = evalUserExpression(source);
  } catch (e) {
    throw new RewardDefinitionError(name, `does not compile: ${(e as Error).message}`);
  }
  if (typeof fn !== 'function') throw new RewardDefinitionError(name, `source must be a function expression, got ${typeof fn}`);
  return fn as RewardFn;
}

/** Checks one reward value: a finite number, or null/undefined/NaN (not applicable → NaN). */
export function checkRewardValue(v: unknown): number {
  if (v === null || v === undefined) return NaN;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v !== 'number') throw new TypeError(`returned ${typeof v} (${String(v).slice(0, 40)}), expected a number or null`);
  if (v === Infinity || v === -Infinity) throw new RangeError(`returned ${v}, expected a finite number`);
  return v;
}

/** One reward function over all samples: values (NaN where not applicable or failed) and per-sample errors. */
export interface RewardColumn {
  values: number[];
  errors: { sample: number; message: string }[];
}

/** Runs fn on every sample; a throw or a bad return value becomes NaN plus an error for that sample. */
export function scoreColumn(fn: RewardFn, samples: readonly RewardSample[]): RewardColumn {
  const values: number[] = [];
  const errors: RewardColumn['errors'] = [];
  for (const s of samples) {
    try {
      values.push(checkRewardValue(fn(s)));
    } catch (e) {
      values.push(NaN);
      errors.push({ sample: s.index, message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    }
  }
  return { values, errors };
}

/** Runs a user JS reward over the samples (in the studio: the sandbox worker of src/worker/reward_sandbox.ts, with its time limit). */
export type JsRewardRunner = (spec: Extract<RewardSpec, { kind: 'js' }>, samples: readonly RewardSample[]) => Promise<RewardColumn>;

export interface RewardTable {
  names: string[]; // (F)
  weights: number[]; // (F)
  rewards_per_func: number[][]; // (B, F)
  rewards: number[]; // (B) TRL's weighted nansum
  errors: { reward: string; sample: number; message: string }[];
}

/** Scores every enabled reward on every sample → TRL's rewards_per_func, weights and combined rewards. */
export async function scoreRewards(specs: readonly RewardSpec[], samples: readonly RewardSample[], runJs: JsRewardRunner): Promise<RewardTable> {
  const active = specs.filter((s) => s.enabled);
  const columns: RewardColumn[] = [];
  for (const spec of active) columns.push(spec.kind === 'js' ? await runJs(spec, samples) : scoreColumn(builtinReward(spec), samples));
  const rewards_per_func = samples.map((_, i) => columns.map((c) => c.values[i]));
  const weights = active.map((s) => s.weight);
  return {
    names: active.map((s) => s.name),
    weights,
    rewards_per_func,
    rewards: Array.from(combineRewards(rewards_per_func, weights)),
    errors: columns.flatMap((c, f) => c.errors.map((e) => ({ reward: active[f].name, ...e }))),
  };
}
