// turn-retokenization: a turn whose stored ids differ from its render. The round-trip proof
// (src/tokenize/roundtrip.ts) aligns the stored prompt ⧺ completion with both ways a trainer builds the
// conversation; the way with fewer differing tokens is the one the trainer used, and each turn that still
// differs from it is named with the causes (a tool call re-rendered from its parsed JSON, a BPE merge at a
// seam, a generation prompt missing or added, a split the tokenizer would not make, rewritten text). Trained
// tokens that are not what the render gives are an error; differences outside the loss a warning. So is a
// tool call that differs only in its spelling: the stored call is the model's own (compact or padded JSON the
// template re-renders canonically), which is exactly what a concatenating loop should train (TRL since #5242);
// it is named because a loop or replay that re-renders the parsed call trains other tokens (TRL before #5242,
// huggingface/trl#5145). A dropped <think> block is reasoning-dropped's.
import { msg } from '../util.ts';
import { CAUSES, WAYS, type Cause, type RoundTripDiff } from '../../tokenize/roundtrip.ts';
import type { Finding, Rule } from '../types.ts';
import { located, quoted, roundTrips, trainerWay, turnName } from '../turns.ts';

export const turnRetokenization: Rule = {
  id: 'turn-retokenization',
  title: 'A turn differs from its chat-template render',
  severity: 'error',
  description: 'Rendering the conversation with the chat template (the full render, or the per-turn concatenation TRL and verl build) and tokenizing it does not give the stored ids of a turn: the turn, positions, causes and loss tokens affected are named.',
  seed: '003 (TRL #5145: a sampled tool call re-tokenized from its parsed JSON, 47 tokens → 26); huggingface/trl#5242',
  needsTokenizer: true,
  check(ctx) {
    const trips = roundTrips(ctx);
    if (typeof trips === 'string') return trips;
    const out: Finding[] = [];
    for (const [b, trip] of trips) {
      if ('error' in trip) {
        out.push({
          rule: this.id, severity: 'warning', sample: b, field: 'completion_ids',
          message: msg`sample ${b}: the conversation in messages could not be checked against the stored ids: ${trip.error}`,
          hint: 'Export the conversation each row was built from (prompt messages, every assistant turn with its tool_calls and reasoning_content, every tool result), with the tools and chat_template_kwargs it was rendered with.',
        });
        continue;
      }
      const { report } = trip;
      const way = trainerWay(report);
      const byTurn = new Map<number, RoundTripDiff[]>();
      for (const d of report[way].diffs) if (d.cause !== 'think-dropped') byTurn.set(d.message, [...(byTurn.get(d.message) ?? []), d]);
      for (const [message, diffs] of byTurn) {
        const loss = diffs.reduce((n, d) => n + d.loss_tokens, 0);
        const stored = diffs.reduce((n, d) => n + d.stored[1] - d.stored[0], 0);
        const rendered = diffs.reduce((n, d) => n + d.rendered[1] - d.rendered[0], 0);
        const causes = [...new Set(diffs.map((d) => d.cause))] as Cause[];
        const first = diffs[0];
        const where = located([first.stored[0], Math.max(first.stored[1], first.stored[0] + 1)], trip.prompt_length);
        const spellingOnly = causes.every((c) => c === 'tool-call-retokenized');
        out.push({
          rule: this.id, severity: loss > 0 && !spellingOnly ? 'error' : 'warning', sample: b, ...where,
          message: msg`sample ${b}, ${turnName(message, first.role)}: the stored ids differ from the ${way} render at ${diffs.length} place(s) — ${causes.join(', ')}; ${stored} stored token(s) vs ${rendered} rendered, ${loss} of them in the loss; first at ${where.field} ${where.span[0]}: ${quoted(first.stored_text)} vs ${quoted(first.rendered_text)}`,
          hint:
            `Compared with the ${way} render: ${WAYS[way]}. ` +
            causes.map((c) => `${c}: ${CAUSES[c]}.`).join(' ') +
            (spellingOnly ? ' The stored call is the model\'s own spelling: a loop that concatenates (TRL since #5242) trains it as sampled, which is right; one that re-renders the parsed call trains the canonical spelling with masks built for the sampled length (TRL before #5242, huggingface/trl#5145).' : ' Keep the sampled ids end to end (concatenate, never re-render a turn the model wrote) and tokenize each appended block as the trainer does.'),
        });
      }
    }
    return out;
  },
};
