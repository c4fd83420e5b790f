// The Doctor: runs every rule of the registry over a grpo-batch/v1 batch and returns the findings sorted
// by severity, the rules it had to skip (and why), and per-group reward statistics. It never throws on a
// parsed batch: a rule that fails is reported as skipped with its error.
import { computeAdvantages, groupRows } from '../grpo/advantages.ts';
import { firstEos } from '../grpo/batch.ts';
import { scaleRewardsOf, type GrpoBatch } from '../io/batch.ts';
import { validateBatch } from '../io/validate.ts';
import { RULES } from './rules.ts';
import { batchRewards, perSample } from './rewards.ts';
import { provenTurns } from './turns.ts';
import type { DoctorContext, DoctorOptions, DoctorReport, Finding, Severity } from './types.ts';

export type { DoctorOptions, DoctorReport, Finding, RuleInfo, Severity } from './types.ts';
export { doctorOptions, modelFacts, NO_TOKENIZER, tokenizerFit, type KnownModel, type ModelFacts, type TokenizerFit } from './tokenizer_fit.ts';
export { RULE_INFO, RULES } from './rules.ts';

const ORDER: Record<Severity, number> = { error: 0, warning: 1, info: 2 };

function context(batch: GrpoBatch, options: DoctorOptions): DoctorContext {
  const eos = new Set(batch.eos_token_ids);
  const pad = batch.pad_token_id;
  const firsts = batch.completion_ids.map((ids) => firstEos(ids, batch.eos_token_ids));
  const realEnd = batch.completion_ids.map((ids, b) => {
    if (firsts[b] >= 0) return firsts[b] + 1;
    let n = ids.length;
    while (n > 0 && ids[n - 1] === pad) n--;
    return n;
  });
  return {
    batch, B: batch.completion_ids.length, G: batch.num_generations, pad, eos, padIsEos: eos.has(pad),
    firstEos: firsts, realEnd, scaleRewards: scaleRewardsOf(batch.config), options,
    groups: groupRows(batch.completion_ids.length, Math.max(1, batch.num_generations), batch.group_ids?.length === batch.completion_ids.length ? batch.group_ids : undefined),
  };
}

export function diagnose(batch: GrpoBatch, options: DoctorOptions = {}): DoctorReport {
  const ctx = context(batch, options);
  // Ids past the vocabulary are token-out-of-vocabulary's findings: the schema checks only that they are ids.
  const findings: Finding[] = validateBatch(batch, { max_positions: options.max_positions, purpose: 'inspect' });
  const skipped: DoctorReport['skipped'] = [];
  for (const rule of RULES) {
    const skip = rule.needsTokenizer && (options.tokenizer ? options.defer_tokenizer_rules : options.tokenizer_unfit);
    if (skip) {
      skipped.push({ rule: rule.id, reason: skip });
      continue;
    }
    try {
      const r = rule.check(ctx);
      if (typeof r === 'string') skipped.push({ rule: rule.id, reason: r });
      else for (const f of r) findings.push(f); // no spread: a rule may find 200k rows
    } catch (e) {
      skipped.push({ rule: rule.id, reason: `could not run on this batch (${(e as Error).message}); fix the schema errors first` });
    }
  }
  findings.sort((a, b) => ORDER[a.severity] - ORDER[b.severity]);
  const rewards = batchRewards(batch);
  const groups = perSample(rewards, ctx.B) ? computeAdvantages(rewards, { num_generations: ctx.G, scale_rewards: ctx.scaleRewards, groups: ctx.groups.rows }).groups : undefined;
  const counts = { error: 0, warning: 0, info: 0 };
  for (const f of findings) counts[f.severity]++;
  // The proven turns for the grid, where the turn rules ran (the proof is kept per run: no second render).
  const turns = options.tokenizer && !options.defer_tokenizer_rules ? provenTurns(ctx) : undefined;
  return { findings, skipped, groups, counts, ...(turns ? { turns } : {}) };
}
