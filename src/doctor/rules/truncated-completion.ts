// truncated-completion: completions that hit max_completion_length without an EOS. Their reward often
// judges half an answer; TRL can drop them from the loss (mask_truncated_completions). Informational.
import type { Rule } from '../types.ts';
import { listSamples, maxOf, msg } from '../util.ts';

export const truncatedCompletion: Rule = {
  id: 'truncated-completion',
  title: 'Completions cut at max_completion_length',
  severity: 'info',
  description: 'Completions without an EOS whose length equals max_completion_length (config, else the longest completion in the batch): the sampler ran out of budget.',
  seed: '002 (expected 15–96 tokens, "not 200+"); TRL mask_truncated_completions',
  check(ctx) {
    // null is TRL's None (no cap): then, as when the config gives none, the longest completion stands for the budget.
    const cap = ctx.batch.config?.max_completion_length ?? undefined;
    const max = cap ?? maxOf(ctx.realEnd);
    const rows = ctx.realEnd.map((n, b) => (ctx.firstEos[b] < 0 && n === max && n > 0 ? b : -1)).filter((b) => b >= 0);
    if (rows.length === 0) return [];
    const source = cap !== undefined ? 'max_completion_length' : 'the longest completion';
    return [{
      rule: this.id,
      severity: 'info',
      message: msg`${rows.length} of ${ctx.B} completions have no EOS and reach ${source} (${max} tokens): samples ${listSamples(rows)}`,
      hint: ctx.batch.config?.mask_truncated_completions === true
        ? 'mask_truncated_completions is set: TRL keeps them out of the loss (completion_mask 0). Their rewards still count in their groups; raise max_completion_length if too many are cut.'
        : 'Truncated answers are often scored as wrong. Raise max_completion_length, or set mask_truncated_completions to keep them out of the loss.',
    }];
  },
};
