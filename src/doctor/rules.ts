// The rule registry: one rule per bug class, in the order the report lists them. The UI lists RULE_INFO.
import type { Rule, RuleInfo } from './types.ts';
import { tokenOutOfVocabulary } from './rules/token-out-of-vocabulary.ts';
import { maskLengthMismatch } from './rules/mask-length-mismatch.ts';
import { maskCoversPadding } from './rules/mask-covers-padding.ts';
import { completionContainsPrompt } from './rules/completion-contains-prompt.ts';
import { promptPaddingSide } from './rules/prompt-padding-side.ts';
import { zeroStdGroup } from './rules/zero-std-group.ts';
import { advantageMismatch } from './rules/advantage-mismatch.ts';
import { eosInsideCompletion } from './rules/eos-inside-completion.ts';
import { padEqualsEos } from './rules/pad-equals-eos.ts';
import { truncatedCompletion } from './rules/truncated-completion.ts';
import { shortCompletions } from './rules/short-completions.ts';
import { retokenizationMismatch } from './rules/retokenization-mismatch.ts';
import { templateMismatch } from './rules/template-mismatch.ts';
import { turnRetokenization } from './rules/turn-retokenization.ts';
import { reasoningDropped } from './rules/reasoning-dropped.ts';
import { toolTokensInLoss } from './rules/tool-tokens-in-loss.ts';
import { toolCallMasked } from './rules/tool-call-masked.ts';
import { positionIdsShift } from './rules/position-ids-shift.ts';
import { logprobMismatch } from './rules/logprob-mismatch.ts';
import { logprobAboveZero } from './rules/logprob-above-zero.ts';
import { nonfinite } from './rules/nonfinite.ts';
import { unscorableRewards } from './rules/unscorable-rewards.ts';
import { importanceSamplingCorrection } from './rules/importance-sampling-correction.ts';
import { trainerNonfinite } from './rules/trainer-nonfinite.ts';
import { numItemsInBatch } from './rules/num-items-in-batch.ts';
import { loggedKl } from './rules/logged-kl.ts';

export const RULES: readonly Rule[] = [
  tokenOutOfVocabulary,
  maskLengthMismatch,
  maskCoversPadding,
  completionContainsPrompt,
  promptPaddingSide,
  zeroStdGroup,
  advantageMismatch,
  unscorableRewards,
  eosInsideCompletion,
  padEqualsEos,
  truncatedCompletion,
  shortCompletions,
  retokenizationMismatch,
  templateMismatch,
  turnRetokenization,
  reasoningDropped,
  toolTokensInLoss,
  toolCallMasked,
  positionIdsShift,
  logprobMismatch,
  logprobAboveZero,
  importanceSamplingCorrection,
  trainerNonfinite,
  numItemsInBatch,
  loggedKl,
  nonfinite,
];

/** The schema checks of src/io/validate.ts, listed like a rule. */
export const SCHEMA_RULE: RuleInfo = {
  id: 'schema',
  title: 'Batch does not follow grpo-batch/v1',
  severity: 'error',
  description: 'Row counts, id types, mask values or per-sample field lengths are wrong: the batch cannot be interpreted reliably.',
  seed: 'grpo-batch/v1 format',
};

export const RULE_INFO: readonly RuleInfo[] = [SCHEMA_RULE, ...RULES.map(({ check: _check, ...info }) => info)];
