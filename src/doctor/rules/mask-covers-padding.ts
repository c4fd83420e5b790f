// mask-covers-padding: completion_mask = 1 on pad positions past the completion's real end. The loss then
// trains on pad tokens and divides by a count that includes them; with left/right confusion (seed 002 bug #5)
// the mask lands on padding and prompt instead, and a mask built longer than its ids (seed 000: +2 template
// tokens) covers the first pads once the rows are right-padded to one width.
//
// The completion's real end R is the first pad after the real tokens: the start of the row's trailing run of
// pad ids, plus one when the pad id is an EOS id (TRL keeps the EOS, so the first id of that run is the
// completion's own EOS). EOS ids inside the row (a multi-turn completion ends every assistant turn with one)
// do not end it, and pad ids followed by other tokens are eos-inside-completion's. A finding names the row,
// R and the mask's effective length (its last 1 + 1). R depends on the pad id (and on whether it is an EOS
// id): when the caller says either was inferred, the finding is a warning naming the inference.
import type { Finding, Rule } from '../types.ts';
import { inferredCaveat, lastOneEnd, padEnd } from '../padding.ts';
import { firstRun, msg } from '../util.ts';

export const maskCoversPadding: Rule = {
  id: 'mask-covers-padding',
  title: 'completion_mask is 1 on padding',
  severity: 'error',
  description: "completion_mask is 1 on pad tokens past the completion's real end (the trailing pad ids of a right-padded row; with pad = EOS, those after its own EOS), so pad positions enter the loss and its normaliser.",
  seed: '002 (bug #5: comp_mask computed for right padding under left padding); 000 (mask 2 tokens longer than the ids, padded form)',
  check(ctx) {
    const out: Finding[] = [];
    const caveat = inferredCaveat(ctx, ['pad_token_id', 'eos_token_ids']);
    ctx.batch.completion_ids.forEach((ids, b) => {
      const mask = ctx.batch.completion_mask[b] ?? [];
      const end = padEnd(ctx, b);
      const bad: number[] = [];
      // Past the real end every id is the pad id (the trailing run).
      for (let t = end; t < Math.min(ids.length, mask.length); t++) if (mask[t] === 1) bad.push(t);
      const run = firstRun(bad);
      if (!run) return;
      out.push({
        rule: this.id,
        severity: caveat.severity,
        sample: b,
        span: run.span,
        message: msg`sample ${b}: completion_mask is 1 on ${run.count} pad position(s) past the completion's real end, first at ${run.span[0]} — the completion has ${end} real tokens, the mask covers ${lastOneEnd(mask)} (its last 1 at ${lastOneEnd(mask) - 1}; pad id ${ctx.pad})${caveat.note}`,
        hint: ctx.padIsEos
          ? 'pad_token_id is an EOS id: build the mask from lengths (1 up to and including the first EOS), not from ids != pad.'
          : 'Mask = 1 up to and including the first EOS, 0 after (TRL: seq_idx <= eos_idx). Right-padded completions keep 0 on padding; a mask built from other ids (template tokens, a different slice) is longer than the completion.',
      });
    });
    return out;
  },
};
