// The default task the studio opens on: two-digit addition ("What is 37 + 45?" → "82"), with the
// embedded model public/models/tiny-adder that this project's own pipeline trained on it
// (scripts/train-default.ts). The task is chosen because its answers are checkable, so a sampled group
// holds right and wrong completions and the GRPO advantages are non-zero: the first step the user
// sees has something to learn. The model was fine-tuned on two answer styles, the bare sum ("82") and a
// sentence ("The answer is 82."), so a group also differs in format and length: the format reward
// separates the styles, and length-normalised losses (TRL's default "dapo") are non-zero at the first,
// on-policy step, where ratio = 1, KL = 0 and "grpo"'s −mean(A) is exactly 0.
// Everything here is pure and shared by the studio, the training script and the tests, so the prompts
// the model was trained on and the prompts it is shown are the same text.
import type { BatchConfig, ChatMessage } from '../io/batch.ts';
import type { RewardSpec } from './rewards.ts';
import type { LossType } from '../kernels/types.ts';

/** Where the default model lives under public/ (and under the site root in the browser). */
export const DEFAULT_MODEL_NAME = 'tiny-adder';
export const DEFAULT_MODEL_PATH = `models/${DEFAULT_MODEL_NAME}`;

export interface AdditionProblem {
  a: number;
  b: number;
}

/** The user turn for a problem (the only wording the model was trained on). */
export function additionQuestion(p: AdditionProblem): string {
  return `What is ${p.a} + ${p.b}?`;
}

/** The reference answer, and the completion the model was mostly fine-tuned to produce (before <|im_end|>). */
export function additionAnswer(p: AdditionProblem): string {
  return String(p.a + p.b);
}

/** The other answer style of fine-tuning: right, but not the bare number the rewards ask for. */
export function additionSentence(p: AdditionProblem): string {
  return `The answer is ${p.a + p.b}.`;
}

/** How often fine-tuning used the sentence style. */
export const SENTENCE_STYLE_FRACTION = 0.3;

export function additionMessages(p: AdditionProblem): ChatMessage[] {
  return [{ role: 'user', content: additionQuestion(p) }];
}

/** Every operand pair the task draws from: a, b in 10..99 (8100 problems). */
export const OPERAND_MIN = 10;
export const OPERAND_MAX = 99;

/**
 * Problems kept out of supervised fine-tuning, so accuracy is measured (and the default GRPO prompts
 * are drawn) on sums the model has never seen: a fixed hash of (a, b) puts one problem in ten here.
 */
export function isHeldOut(p: AdditionProblem): boolean {
  return (p.a * 31 + p.b * 17) % 10 === 3;
}

export function allProblems(): AdditionProblem[] {
  const out: AdditionProblem[] = [];
  for (let a = OPERAND_MIN; a <= OPERAND_MAX; a++) for (let b = OPERAND_MIN; b <= OPERAND_MAX; b++) out.push({ a, b });
  return out;
}

/** The prompts preloaded in the studio: held-out sums, with and without a carry, 2- and 3-digit answers (checked by a test). */
export const DEFAULT_PROBLEMS: readonly AdditionProblem[] = [
  { a: 25, b: 34 },
  { a: 17, b: 28 },
  { a: 74, b: 77 },
  { a: 66, b: 41 },
];

/** A prompt of the preloaded set: the conversation to render and the reference answer rewards check. */
export interface TaskPrompt {
  messages: ChatMessage[];
  answer: string;
}

export const DEFAULT_PROMPTS: readonly TaskPrompt[] = DEFAULT_PROBLEMS.map((p) => ({ messages: additionMessages(p), answer: additionAnswer(p) }));

/**
 * The preloaded reward functions (completion text as the studio decodes it: special tokens kept).
 * correctness: the completion without the trailing <|im_end|> is exactly the sum (the sentence style
 * scores 0). format: a bare integer that ends with <|im_end|> (a completion cut off at
 * max_completion_length scores 0).
 */
export const DEFAULT_REWARDS: readonly RewardSpec[] = [
  { kind: 'exact_match', name: 'correctness', weight: 1.0, enabled: true, normalize: true },
  { kind: 'regex', name: 'format', weight: 0.2, enabled: true, pattern: '^\\d+<\\|im_end\\|>$', flags: '' },
];

/**
 * The settings the studio opens with on this task. The learning rate is far above TRL's 1e-6 default,
 * so that one step's effect on the log-probs is visible; AdamW's first step moves every weight by about
 * lr·sign(g), and at 1e-3 it overshoots (positive-advantage completions lose log-prob too), while at
 * 1e-4 the step raises positive- and lowers negative-advantage completions on every seed we tried.
 * The studio's sampler seed is 42.
 */
export const DEFAULT_GRPO_CONFIG: BatchConfig & { num_generations: number; learning_rate: number; max_grad_norm: number; loss_type: LossType } = {
  num_generations: 8,
  temperature: 1,
  max_completion_length: 12, // "The answer is 151." + <|im_end|> is 9 tokens
  loss_type: 'dapo', // TRL's default
  beta: 0.04,
  kl_estimator: 'k3',
  epsilon: 0.2,
  epsilon_high: 0.28,
  scale_rewards: 'group',
  advantage_estimator: 'trl',
  importance_sampling_level: 'token',
  position_ids: 'from_attention_mask',
  learning_rate: 1e-4,
  max_grad_norm: 1.0,
};
