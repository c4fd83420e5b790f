// pad-equals-eos: pad_token_id is one of the EOS ids (Llama-3 sets pad = <|eot_id|>/<|end_of_text|>).
// Not a bug by itself, but any mask built from `ids != pad` then drops the real EOS and any "count EOS"
// diagnostic sees the padding (seed 002: "Prompt有50+个eot").
import { msg } from '../util.ts';
import type { Rule } from '../types.ts';

export const padEqualsEos: Rule = {
  id: 'pad-equals-eos',
  title: 'pad_token_id is also an EOS id',
  severity: 'info',
  description: 'pad_token_id is in eos_token_ids, so masks must come from lengths, not from comparing ids with the pad id.',
  seed: '002 (Llama-3: pad_token_id == eot_token_id, 36 <|eot_id|> counted in a padded prompt)',
  check(ctx) {
    if (!ctx.padIsEos) return [];
    return [{
      rule: this.id,
      severity: 'info',
      message: msg`pad_token_id ${ctx.pad} is also an EOS id: padding and end-of-sequence are the same token`,
      hint: 'Derive completion_mask from the first EOS position and prompt_mask from lengths; never from ids != pad_token_id (that masks out the real EOS).',
    }];
  },
};
