// eos-inside-completion: real tokens after the first EOS. If they are masked in, the loss trains on text
// the policy would never have produced after stopping; if several EOS/EOT appear, the sampler did not
// stop at EOS (seed 002: "Response有10+个eot → 异常"). An EOS followed by tool output (tool_mask = 0)
// is a multi-turn boundary, not a bug.
import type { Finding, Rule } from '../types.ts';
import { firstRun, msg } from '../util.ts';
import { inferredCaveat } from '../padding.ts';

export const eosInsideCompletion: Rule = {
  id: 'eos-inside-completion',
  title: 'Tokens after EOS',
  severity: 'error',
  description: 'Real (non-pad) tokens follow the first EOS: masked in, they are trained on; masked out, the sampler still did not stop at EOS (several EOS/EOT in one completion).',
  seed: '002 (EOT counted 10+ times in a response; mask kept past EOS)',
  check(ctx) {
    const out: Finding[] = [];
    // Where the first EOS is and which ids are pads: a warning naming the inference when the importer inferred them.
    const caveat = inferredCaveat(ctx, ['eos_token_ids', 'pad_token_id']);
    ctx.batch.completion_ids.forEach((ids, b) => {
      const mask = ctx.batch.completion_mask[b] ?? [];
      const tool = ctx.batch.tool_mask?.[b];
      const first = ctx.firstEos[b];
      if (first < 0) return;
      const after: number[] = [];
      for (let t = first + 1; t < ids.length; t++) {
        // Tool output after an assistant turn's EOS makes a multi-turn completion: its EOS ends a turn.
        if (tool && tool[t] === 0) return;
        if (ids[t] !== ctx.pad) after.push(t);
      }
      if (after.length === 0) return;
      const maskedIn = after.filter((t) => mask[t] === 1);
      const last = after[after.length - 1];
      const eosCount = ids.filter((id, t) => t <= last && ctx.eos.has(id)).length;
      const run = firstRun(maskedIn.length ? maskedIn : after)!;
      out.push(maskedIn.length
        ? {
            rule: this.id, severity: caveat.severity, sample: b, span: run.span,
            message: msg`sample ${b}: ${maskedIn.length} token(s) after the first EOS (position ${first}) are masked in, first at ${run.span[0]}${caveat.note}`,
            hint: 'completion_mask must be 0 after the first EOS (TRL: seq_idx <= eos_idx), whatever the sampler appended.',
          }
        : {
            rule: this.id, severity: 'warning', sample: b, span: run.span,
            message: msg`sample ${b}: ${after.length} real token(s) follow the first EOS (position ${first}), ${eosCount} EOS/EOT token(s) in all; they are masked out`,
            hint: 'The sampler did not stop at EOS: pass every EOS/EOT id (e.g. <|eot_id|> and <|end_of_text|>) as generation stop tokens.',
          });
    });
    return out;
  },
};
