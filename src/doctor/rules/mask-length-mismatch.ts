// mask-length-mismatch: a per-token array whose row length differs from its id row. In PyTorch this is
// a shape error deep inside the loss (seed 000: completion_mask 101 vs completion_ids 99, then padded to
// different widths), or — worse — a silent misalignment when both are padded to the same width.
import { PER_TOKEN_FIELDS } from '../../io/batch.ts';
import type { Finding, Rule } from '../types.ts';

export const maskLengthMismatch: Rule = {
  id: 'mask-length-mismatch',
  title: 'Mask or per-token array length ≠ token count',
  severity: 'error',
  description: 'completion_mask, tool_mask or a per-token log-prob row has a different length than completion_ids (or prompt_mask than prompt_ids) for a sample.',
  seed: '000 (DeepSeek-R1 custom mask is 2 tokens longer than the ids); 003 (TRL #5145: tool_mask longer after tool-call retokenization)',
  check(ctx) {
    const out: Finding[] = [];
    const pairs: [string, number[][] | undefined, 'completion_ids' | 'prompt_ids'][] = [
      ...PER_TOKEN_FIELDS.map((f) => [f, ctx.batch[f], 'completion_ids'] as [string, number[][] | undefined, 'completion_ids']),
      ['prompt_mask', ctx.batch.prompt_mask, 'prompt_ids'],
    ];
    for (const [field, rows, idsField] of pairs) {
      if (!rows) continue;
      const ids = ctx.batch[idsField];
      for (let b = 0; b < Math.min(rows.length, ids.length); b++) {
        const n = rows[b].length;
        const m = ids[b].length;
        if (n === m) continue;
        out.push({
          rule: this.id,
          severity: 'error',
          sample: b,
          field,
          span: [Math.min(n, m), Math.max(n, m)],
          message: `sample ${b}: ${field} has ${n} entries, ${idsField} has ${m} (${n > m ? `${n - m} extra` : `${m - n} missing`})`,
          hint: `Build ${field} from the same sliced/truncated ids it masks; never pad or extend one without the other. A constant offset (e.g. +2) points at template tokens counted in the mask only.`,
        });
      }
    }
    return out;
  },
};
