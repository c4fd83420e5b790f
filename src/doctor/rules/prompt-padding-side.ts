// prompt-padding-side: prompts must be left-padded (the completion starts right after the last prompt
// token). Right padding puts pads between prompt and completion; pads in the middle or real tokens masked
// out make the model see a different prompt than generation did (seed 002 bugs #4, #5).
import { msg } from '../util.ts';
import type { Finding, Rule } from '../types.ts';
import { inferredCaveat } from '../padding.ts';

export const promptPaddingSide: Rule = {
  id: 'prompt-padding-side',
  title: 'Prompt padding on the wrong side',
  severity: 'error',
  description: 'A prompt row has pad tokens at its right end or in its middle, real tokens masked out by prompt_mask, or left pads that prompt_mask does not mask.',
  seed: '002 (bugs #4 and #5: right-padding arithmetic applied to left-padded batches)',
  check(ctx) {
    const out: Finding[] = [];
    const add = (b: number, severity: Finding['severity'], span: [number, number], message: string, hint: string) =>
      out.push({ rule: this.id, severity, sample: b, field: 'prompt_ids', span, message: msg`sample ${b}: ${message}`, hint });
    // Findings that compare ids with the pad id: a warning naming the inference when the importer inferred it.
    const caveat = inferredCaveat(ctx, ['pad_token_id']);
    const byPad = (b: number, span: [number, number], message: string, hint: string) => add(b, caveat.severity, span, message + caveat.note, hint);
    ctx.batch.prompt_ids.forEach((ids, b) => {
      const mask = ctx.batch.prompt_mask?.[b];
      if (mask) {
        const firstReal = mask.indexOf(1);
        const holeAt = firstReal < 0 ? -1 : mask.indexOf(0, firstReal);
        if (firstReal < 0 && ids.length > 0) add(b, 'error', [0, ids.length], 'prompt_mask is 0 on the whole prompt', 'Every prompt needs at least one real token.');
        else if (holeAt >= 0) {
          const right = mask.slice(holeAt).every((m) => m === 0);
          add(b, 'error', [holeAt, right ? mask.length : holeAt + 1],
            right ? `prompt_mask ends with ${mask.length - holeAt} zero(s): the prompt is right-padded` : `prompt_mask has a 0 at position ${holeAt} between real tokens`,
            'Pad prompts on the left (tokenizer.padding_side = "left"), so the completion follows the last prompt token directly.');
        }
        const unmaskedReal = mask.findIndex((m, t) => m === 0 && ids[t] !== ctx.pad);
        if (unmaskedReal >= 0) byPad(b, [unmaskedReal, unmaskedReal + 1], `prompt token ${ids[unmaskedReal]} at position ${unmaskedReal} is masked out but is not the pad id`, 'prompt_mask must be 1 on every real prompt token.');
        if (!ctx.padIsEos) {
          const attendedPad = mask.findIndex((m, t) => m === 1 && ids[t] === ctx.pad);
          if (attendedPad >= 0) add(b, 'warning', [attendedPad, attendedPad + 1], `a pad token at position ${attendedPad} has prompt_mask = 1`, 'Pads must have prompt_mask = 0; otherwise the model attends to them.');
        }
        return;
      }
      // Ragged rows: no mask, so every token is attended. A pad at either end is padding nobody masks.
      if (ids.length === 0) return add(b, 'error', [0, 0], 'the prompt is empty', 'Every prompt needs at least one real token.');
      if (ids[ids.length - 1] === ctx.pad && !ctx.padIsEos) {
        let s = ids.length;
        while (s > 0 && ids[s - 1] === ctx.pad) s--;
        byPad(b, [s, ids.length], `the prompt row ends with ${ids.length - s} pad token(s): right padding`, 'Pad prompts on the left and give prompt_mask, or export unpadded rows.');
      } else if (ids[0] === ctx.pad) {
        let e = 0;
        while (e < ids.length && ids[e] === ctx.pad) e++;
        byPad(b, [0, e], `the prompt row starts with ${e} pad token(s) but no prompt_mask masks them`, 'Export prompt_mask with padded rows (or un-pad the rows) so pads are not attended.');
      }
    });
    return out;
  },
};
