// mask-covers-padding: completion_mask = 1 on pad positions (after the first EOS, or in the trailing
// padding of a truncated row). The loss then trains on pad tokens and divides by a count that includes
// them; with left/right confusion (seed 002 bug #5) the mask lands on padding and prompt instead.
import type { Finding, Rule } from '../types.ts';
import { firstRun } from '../util.ts';

export const maskCoversPadding: Rule = {
  id: 'mask-covers-padding',
  title: 'completion_mask is 1 on padding',
  severity: 'error',
  description: 'completion_mask is 1 on pad tokens after the first EOS or in the right padding, so pad positions enter the loss and its normaliser.',
  seed: '002 (bug #5: comp_mask computed for right padding under left padding)',
  check(ctx) {
    const out: Finding[] = [];
    ctx.batch.completion_ids.forEach((ids, b) => {
      const mask = ctx.batch.completion_mask[b] ?? [];
      const bad: number[] = [];
      // Past the real end every token is padding (or junk after EOS, which eos-inside-completion reports).
      for (let t = ctx.realEnd[b]; t < Math.min(ids.length, mask.length); t++) if (mask[t] === 1 && ids[t] === ctx.pad) bad.push(t);
      const run = firstRun(bad);
      if (!run) return;
      out.push({
        rule: this.id,
        severity: 'error',
        sample: b,
        span: run.span,
        message: `sample ${b}: completion_mask is 1 on ${run.count} pad position(s) after the real completion (${ctx.realEnd[b]} tokens), first at ${run.span[0]}`,
        hint: ctx.padIsEos
          ? 'pad_token_id is an EOS id: build the mask from lengths (1 up to and including the first EOS), not from ids != pad.'
          : 'Mask = 1 up to and including the first EOS, 0 after (TRL: seq_idx <= eos_idx). Right-padded completions keep 0 on padding.',
      });
    });
    return out;
  },
};
