// completion-contains-prompt: the completion starts with prompt tokens, or contains the chat template's
// assistant header. The signature of slicing the response at the count of real prompt tokens instead of
// the padded prompt width under left padding (seed 002 bug #4): the "response" then begins with the
// prompt's tail, the reward judges the prompt, and the loss trains on it.
import type { Finding, Rule } from '../types.ts';
import { showToken, suffixPrefixOverlap, msg } from '../util.ts';

/** Special tokens that open a chat turn: never part of a single assistant reply. */
const HEADER_TOKENS = ['<|im_start|>', '<|start_header_id|>', '<|end_header_id|>', '<start_of_turn>', '<|user|>', '<|assistant|>', '<|system|>', '[INST]', '<|begin_of_text|>', '<｜User｜>', '<｜Assistant｜>'];

/** Real prompt tokens of a row (prompt_mask = 1, or the whole row). */
function realPrompt(ids: number[], mask: number[] | undefined): number[] {
  return mask ? ids.filter((_, t) => mask[t] === 1) : ids;
}

/** Length of the longest common prefix of row[from:] and pat. */
function commonPrefix(row: number[], from: number, pat: number[]): number {
  let n = 0;
  while (n < pat.length && from + n < row.length && row[from + n] === pat[n]) n++;
  return n;
}

/** row[from : from + n] === pat[at : at + n] */
function startsWith(row: number[], from: number, pat: number[], at = 0, n = pat.length - at): boolean {
  if (from + n > row.length || at + n > pat.length) return false;
  for (let i = 0; i < n; i++) if (row[from + i] !== pat[at + i]) return false;
  return true;
}

export const completionContainsPrompt: Rule = {
  id: 'completion-contains-prompt',
  title: 'Completion contains the prompt or a chat header',
  severity: 'error',
  description: 'A completion begins with the prompt\'s last tokens (or its first ones), or contains the assistant header / a turn-opening special token where the policy is trained: the response slice is wrong.',
  seed: '002 (bug #4: response = out[i, src_len:] with src_len the non-pad count under left padding)',
  check(ctx) {
    const out: Finding[] = [];
    const tok = ctx.options.tokenizer;
    const headerIds = new Set<number>();
    if (tok) for (const h of HEADER_TOKENS) {
      const id = tok.tokenToId(h);
      if (id !== undefined && tok.isSpecial(id)) headerIds.add(id);
    }
    // Length of the prompt suffix (or prefix) each completion starts with, after any leading pads.
    const leak = ctx.batch.completion_ids.map((ids, b) => {
      const prompt = realPrompt(ctx.batch.prompt_ids[b] ?? [], ctx.batch.prompt_mask?.[b]);
      let start = 0;
      while (start < ids.length && ids[start] === ctx.pad && !ctx.eos.has(ids[start])) start++;
      // The longest n with ids[start : start + n] equal to the prompt's last n tokens or its first n,
      // in linear time (trying every n from the longest down is quadratic in the row length).
      const m = Math.min(prompt.length, ids.length - start);
      const head = ids.slice(start, start + m);
      const k = Math.max(suffixPrefixOverlap(prompt.slice(prompt.length - m), head), commonPrefix(ids, start, prompt));
      return { start, k };
    });
    // One leaked token is chance for a single row, but not when every row of the group shows it.
    const groupLeaks = (b: number) => {
      const g0 = Math.floor(b / ctx.G) * ctx.G;
      return ctx.G > 1 && leak.slice(g0, g0 + ctx.G).every((l) => l.k >= 1);
    };
    ctx.batch.completion_ids.forEach((ids, b) => {
      const prompt = realPrompt(ctx.batch.prompt_ids[b] ?? [], ctx.batch.prompt_mask?.[b]);
      const trained = (t: number) => ctx.batch.completion_mask[b]?.[t] === 1 && (ctx.batch.tool_mask?.[b]?.[t] ?? 1) === 1;
      const { start, k: n } = leak[b];
      const k = n >= 2 || (n === 1 && groupLeaks(b)) ? n : 0;
      if (k > 0) {
        out.push({
          rule: this.id, severity: 'error', sample: b, span: [start, start + k],
          message: msg`sample ${b}: the completion begins with ${k} token(s) of its own prompt${start ? ` after ${start} pad token(s)` : ''}`,
          hint: 'Slice the response at the padded prompt width (input_ids.shape[1]), not at the number of real prompt tokens: under left padding the pads are at the start.',
        });
        return;
      }
      // (b) contains the prompt's generation header (its last 3 tokens) or a turn-opening special token.
      const header = prompt.length >= 3 ? prompt.slice(prompt.length - 3) : [];
      for (let t = start; t < ids.length; t++) {
        if (!trained(t)) continue;
        const isHeaderRun = header.length > 0 && startsWith(ids, t, header);
        if (isHeaderRun || headerIds.has(ids[t])) {
          out.push({
            rule: this.id, severity: 'error', sample: b, span: [t, t + (isHeaderRun ? header.length : 1)],
            message: msg`sample ${b}: a chat-template header ${isHeaderRun ? `(the prompt's last ${header.length} tokens)` : showToken(ctx, ids[t])} appears at completion position ${t}, where the loss trains`,
            hint: 'The completion should hold only the assistant reply. Tool or user turns inside a completion must have tool_mask = 0.',
          });
          return;
        }
      }
    });
    return out;
  },
};
