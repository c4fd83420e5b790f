// The template round-trip proof of one conversation (issue 25): the row's messages rendered with the model's
// chat template both ways trainers build a multi-turn sequence, each tokenized and aligned with the ids the
// trainer stored (prompt_ids ⧺ completion_ids), every differing token given a cause and the loss-mask tokens
// it touches counted.
//
// The two ways (WAYS):
// - full: apply_chat_template over all messages, tokenized once — what a trainer that re-renders the whole
//   conversation each turn trains on (TRL's _tool_call_loop before huggingface/trl#5242 re-rendered
//   prompt + completions + tool results with add_generation_prompt=True every iteration; SFT-style replays).
// - incremental: pieces tokenized apart and concatenated — the prompt rendered with the generation prompt,
//   each assistant turn as the model wrote it (through its EOS), each tool block as the suffix TRL's
//   `_get_tool_suffix_ids` cuts from a dummy conversation (huggingface/trl trl/trainer/grpo_trainer.py,
//   `_tool_call_loop` since #5242: prompt_ids + completion_ids + suffix_ids). verl's ToolAgentLoop
//   (volcengine/verl verl/experimental/agent_loop/tool_agent_loop.py) concatenates the same way, its tool
//   block rendered alone minus the template's default system prompt.
// Seams between pieces are where BPE can merge differently than in one encode; the full render is where a
// template rewrites earlier turns (Qwen3 drops the <think> block of assistant turns before the last user
// query). Roles (system / user / assistant / tool_call / tool) are attributed on the incremental render, where
// the pieces are known (a prompt's messages split where the renders of its prefixes stop matching), and
// carried to the stored ids and the full render through the token alignment (src/io/batch_diff.ts alignTokens).
// Pure and synchronous: the template must already be known to finish (the Doctor preflights it,
// src/tokenize/bounded_node.ts). Cost per conversation: a render of it and of its prompt, two small renders per
// assistant turn and one per tool block, two tokenizations of the conversation, three alignments.
import { alignTokens, type TokenOp } from '../io/batch_diff.ts';
import type { ChatMessage } from '../io/batch.ts';
import type { Tokenizer } from './tokenizer.ts';
import { TURN_ROLES, type TurnRole } from '../io/turns.ts';

// The roles (system / user / assistant / tool_call / tool) are shared with the Doctor's report and the grid.
export { TURN_ROLES, type TurnRole } from '../io/turns.ts';

/**
 * The dummy conversation TRL's `_get_tool_suffix_ids` renders a block of messages after (huggingface/trl
 * trl/trainer/grpo_trainer.py): a user turn and an assistant turn — calling the block's first tool by name when
 * the block is a tool result (some templates take the tool response header from the call). What the template
 * writes after the dummy's end-of-turn tokens is the block's suffix (src/grpo/tool_loop.ts cuts it in ids).
 */
export const suffixDummy = (first: ChatMessage): ChatMessage[] => [
  { role: 'user', content: 'dummy' },
  first.role === 'tool'
    ? { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: String(first.name ?? 'tool'), arguments: {} } }] }
    : { role: 'assistant', content: 'dummy' },
];

/** How a trainer builds a multi-turn sequence from a conversation (see the header). */
export const WAYS = {
  incremental: 'prompt, each generated turn and each tool block tokenized apart and concatenated (TRL _tool_call_loop, verl ToolAgentLoop)',
  full: 'apply_chat_template over all messages, tokenized once (a trainer that re-renders the conversation)',
} as const;
export type Way = keyof typeof WAYS;

/** Why a stored token differs from the render, checked in this order. */
export const CAUSES = {
  'think-dropped': 'a <think> block on one side only: the template drops the reasoning of earlier assistant turns (Qwen3: turns before the last user query)',
  'generation-prompt-missing': 'the render writes a generation prompt (assistant header) the stored ids lack',
  'generation-prompt-added': 'the stored ids hold a generation prompt the render does not write there',
  'tool-call-retokenized': 'tokens of a tool call differ: the call was re-rendered from its parsed JSON (whitespace, key order) or re-tokenized',
  'bpe-seam': 'same text split differently across a seam where two separately tokenized pieces meet',
  retokenized: 'same text split differently inside a turn: the stored ids are not the tokenizer\'s own split',
  'text-differs': 'the text itself differs: the template rewrites the content, or the messages do not match the ids',
} as const;
export type Cause = keyof typeof CAUSES;

/** One turn's span in the stored ids (prompt ⧺ completion positions). */
export interface TurnSpan {
  /** Index of the message in the conversation. */
  message: number;
  role: TurnRole;
  start: number;
  end: number;
  /** Completion tokens of the span with loss weight ≠ 0. */
  loss_tokens: number;
}

/** A run of differing tokens: stored [start, end) against rendered [start, end) (one side may be empty). */
export interface RoundTripDiff {
  cause: Cause;
  message: number;
  role: TurnRole;
  stored: [number, number];
  rendered: [number, number];
  stored_text: string;
  rendered_text: string;
  /** Stored tokens of the run inside the completion with loss weight ≠ 0. */
  loss_tokens: number;
}

export interface WayReport {
  /** The rendered ids of this way. */
  ids: number[];
  diffs: RoundTripDiff[];
  /** Stored tokens that differ, rendered tokens that differ, loss tokens affected. */
  stored_tokens: number;
  rendered_tokens: number;
  loss_tokens: number;
  by_cause: Partial<Record<Cause, number>>;
}

/** A row's turns, and its differences from each way's render. */
export type RoundTripReport = { turns: TurnSpan[] } & Record<Way, WayReport>;

/** One conversation and what the trainer stored for it. */
export interface RoundTripInput {
  messages: readonly ChatMessage[];
  /** prompt_ids ⧺ completion_ids, real tokens only (no padding). */
  ids: readonly number[];
  /** Where the completion starts in `ids`. */
  prompt_length: number;
  /** Loss weight per completion token (completion_mask × tool_mask as TRL multiplies them); length ids − prompt. */
  loss: readonly number[];
}

export interface RoundTripOptions {
  tools?: readonly object[];
  template_kwargs?: Record<string, unknown>;
  /** End-of-turn ids (the batch's eos_token_ids); default the tokenizer's EOS. */
  eos_token_ids?: readonly number[];
}

/** Why a conversation could not be proven (no assistant turn, the template raised, ids too different to align). */
export class RoundTripError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RoundTripError';
  }
}

/** A reasoning block as Qwen3 and DeepSeek-R1 templates write it (an empty one included). */
const THINK = /<think>[\s\S]*?<\/think>/;

/** A rendered token row with each token's message and role. */
interface Attributed {
  ids: number[];
  message: Int32Array;
  role: Uint8Array;
  /** Positions where a separately tokenized piece starts (incremental) or a message starts. */
  seams: Set<number>;
}

const commonPrefix = (a: string, b: string) => {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
};

const roleOf = (m: ChatMessage): TurnRole => (m.role === 'tool' || m.role === 'system' || m.role === 'assistant' ? m.role : 'user');

/** The template facts every conversation shares: the generation prompt, end-of-turn texts, header tokens. */
interface TemplateFacts {
  /** Text add_generation_prompt appends (Llama 3's template appends it whatever the flag). */
  gen: string;
  /** Texts of the end-of-turn ids. */
  eos: string[];
  /** Texts of the other special tokens (a message header starts with one). */
  specials: string[];
}

/**
 * A prover bound to one tokenizer and its render options: `prove(input)` gives the report of one
 * conversation. Template facts are derived once, from probe renders.
 */
export function roundTripProver(tok: Tokenizer, opts: RoundTripOptions = {}): (input: RoundTripInput) => RoundTripReport {
  const render = (msgs: readonly ChatMessage[], gen: boolean, tools = true) => {
    try {
      return tok.applyChatTemplate(msgs, { add_generation_prompt: gen, template_kwargs: opts.template_kwargs, tools: tools && opts.tools ? [...opts.tools] : undefined });
    } catch (e) {
      throw new RoundTripError(`the chat template raised: ${(e as Error).message.split('\n')[0]}`);
    }
  };
  const eosIds = opts.eos_token_ids?.length ? opts.eos_token_ids : tok.eos_token_id !== undefined ? [tok.eos_token_id] : [];
  const eosSet = new Set(eosIds);
  const facts: TemplateFacts = {
    gen: '',
    eos: eosIds.map((id) => tok.decode([id])).filter((t) => t.length > 0),
    specials: tok.special_token_ids.filter((id) => !eosSet.has(id)).map((id) => tok.decode([id])).filter((t) => t.length > 0),
  };
  {
    const probe: ChatMessage[] = [{ role: 'user', content: 'x' }];
    const withGen = render(probe, true, false);
    const without = render(probe, false, false);
    if (withGen !== without && withGen.startsWith(without)) facts.gen = withGen.slice(without.length);
    else {
      // The template ignores add_generation_prompt (Llama 3's appends the assistant header always): the header
      // is the common tail of a one- and a two-message render, after its last end-of-turn text.
      const two = render([...probe, { role: 'assistant', content: 'y' }], false, false);
      let n = 0;
      while (n < without.length && n < two.length && without[without.length - 1 - n] === two[two.length - 1 - n]) n++;
      const tail = without.slice(without.length - n);
      const cut = Math.max(...facts.eos.map((e) => (tail.lastIndexOf(e) >= 0 ? tail.lastIndexOf(e) + e.length : -1)));
      facts.gen = cut >= 0 ? tail.slice(cut) : '';
    }
  }
  /** End of the first end-of-turn text at or after `from`, or −1 when none follows. */
  const eosEnd = (text: string, from: number) => {
    let best = -1;
    for (const e of facts.eos) {
      const i = text.indexOf(e, from);
      if (i >= 0 && (best < 0 || i + e.length < best)) best = i + e.length;
    }
    return best;
  };
  /** Start of the last end-of-turn text in `text`, or −1. */
  const lastEos = (text: string) => Math.max(-1, ...facts.eos.map((e) => text.lastIndexOf(e)));
  /** Where message `j` starts in `target`: the common prefix with the render of messages[:j], backed off a header token. */
  const boundary = (prefix: string, target: string) => {
    let cp = commonPrefix(prefix, target);
    if (cp < prefix.length) {
      // A template that appends its assistant header always diverges just after the header's first token
      // ("<|start_header_id|>"): that token opens the next message.
      const head = target.slice(0, cp);
      const sp = facts.specials.find((s) => head.endsWith(s));
      if (sp) cp -= sp.length;
    }
    return cp;
  };
  /**
   * TRL's _get_tool_suffix_ids on text: render a dummy conversation (a user turn, an assistant turn calling the
   * block's first tool) with and without the block; the suffix is what follows the dummy's end-of-turn texts
   * (TRL cuts the token ids at the prefix's last EOS — the same place, EOS ids being special tokens that
   * split the encoding). How many end-of-turn texts the dummy writes is counted once per dummy.
   */
  const dummyEos = new Map<string, number>();
  const suffixText = (block: readonly ChatMessage[], gen: boolean) => {
    const dummy = suffixDummy(block[0]);
    const key = JSON.stringify(dummy);
    if (!dummyEos.has(key)) {
      const prefix = render(dummy, false, false);
      let count = 0;
      for (let at = eosEnd(prefix, 0); at >= 0; at = eosEnd(prefix, at)) count++;
      dummyEos.set(key, count);
    }
    const full = render([...dummy, ...block], gen, false);
    let at = 0;
    for (let k = dummyEos.get(key)!; k > 0 && at >= 0; k--) at = eosEnd(full, at);
    return full.slice(Math.max(0, at));
  };

  const prompts = new Map<string, { prompt: string; runs: [number, number, TurnRole][] }>();

  return (input: RoundTripInput): RoundTripReport => {
    const msgs = input.messages;
    const assistants = msgs.flatMap((m, i) => (m.role === 'assistant' ? [i] : []));
    if (assistants.length === 0) throw new RoundTripError('the conversation has no assistant turn');
    // A conversation that ends with the model's turn ends at its end-of-turn text, as the stored completion
    // does: what a template writes after it ("\n", Llama 3's always-appended assistant header) is never trained.
    const rendered = render(msgs, false);
    const endsWithTurn = msgs[msgs.length - 1].role === 'assistant' && lastEos(rendered) >= 0;
    const fullText = endsWithTurn ? rendered.slice(0, eosEnd(rendered, lastEos(rendered))) : rendered;
    const inc = incremental(msgs, assistants);
    const fullIds = tok.encode(fullText);
    const stored = [...input.ids];
    const isSpecial = (id: number) => tok.isSpecial(id);
    const align = (a: readonly number[], b: readonly number[]) => {
      try {
        return alignTokens(a, b, isSpecial);
      } catch (e) {
        throw new RoundTripError((e as Error).message);
      }
    };
    const opsInc = align(stored, inc.ids);
    const opsFull = align(fullIds, inc.ids);
    const full = carry(fullIds, opsFull, inc);
    const storedAttr = carry(stored, opsInc, inc);
    storedAttr.seams.add(input.prompt_length);
    const lossAt = (s: number) => (s >= input.prompt_length && (input.loss[s - input.prompt_length] ?? 0) !== 0 ? 1 : 0);
    const turns: TurnSpan[] = [];
    for (let s = 0; s < stored.length; s++) {
      const [m, r] = [storedAttr.message[s], TURN_ROLES[storedAttr.role[s]]];
      const last = turns[turns.length - 1];
      if (last && last.message === m && last.role === r && last.end === s) {
        last.end++;
        last.loss_tokens += lossAt(s);
      } else turns.push({ message: m, role: r, start: s, end: s + 1, loss_tokens: lossAt(s) });
    }
    const way = (ops: TokenOp[], rendered: Attributed) => diffWay(stored, storedAttr, rendered, ops, lossAt);
    return { turns, full: way(align(stored, fullIds), full), incremental: way(opsInc, inc) };
  };

  /**
   * The prompt (messages before the first assistant turn, a0) rendered with the generation prompt, with where
   * each of its messages starts. Kept per prompt (`prompts`): the G rows of a group share it.
   */
  function promptPiece(msgs: readonly ChatMessage[], a0: number) {
    const key = JSON.stringify(msgs.slice(0, a0));
    let hit = prompts.get(key);
    if (!hit) {
      const prompt = a0 > 0 ? render(msgs.slice(0, a0), true) : '';
      const runs: [number, number, TurnRole][] = [[0, 0, roleOf(msgs[0] ?? { role: 'user', content: '' })]];
      for (let j = 1; j < a0; j++) runs.push([boundary(render(msgs.slice(0, j), false), prompt), j, roleOf(msgs[j])]);
      if (facts.gen && prompt.endsWith(facts.gen)) runs.push([prompt.length - facts.gen.length, a0, 'assistant']);
      hit = { prompt, runs };
      prompts.set(key, hit);
    }
    return hit;
  }

  /** The incremental build: prompt piece, each assistant turn as generated, each tool block as TRL's suffix. */
  function incremental(msgs: readonly ChatMessage[], assistants: number[]): Attributed {
    const ids: number[] = [];
    const message: number[] = [];
    const role: number[] = [];
    const seams = new Set<number>();
    /** Encodes one piece; runs: [char offset, message, role] ascending. */
    const piece = (text: string, runs: [number, number, TurnRole][]) => {
      if (text.length === 0) return;
      seams.add(ids.length);
      const pieceIds = tok.encode(text);
      if (runs.length === 1) {
        for (const id of pieceIds) [ids.push(id), message.push(runs[0][1]), role.push(TURN_ROLES.indexOf(runs[0][2]))];
        return;
      }
      // Where each token sits in the piece's text, to find its run (spans cost a pass over the bytes: only here).
      const { tokens } = tok.spans(pieceIds);
      let r = 0;
      for (const t of tokens) {
        // A token belongs to the last run that starts before its end (a boundary inside a token moves it on).
        while (r + 1 < runs.length && runs[r + 1][0] < Math.max(t.end, t.start + 1)) r++;
        ids.push(t.id);
        message.push(runs[r][1]);
        role.push(TURN_ROLES.indexOf(runs[r][2]));
      }
    };
    const { prompt, runs } = promptPiece(msgs, assistants[0]);
    piece(prompt, runs);
    assistants.forEach((k, i) => {
      const { text, call } = generated(msgs, k);
      const turnRuns: [number, number, TurnRole][] = [[0, k, 'assistant']];
      if (call) turnRuns.push([call[0], k, 'tool_call'], [call[1], k, 'assistant']);
      piece(text, turnRuns);
      // The messages up to the next assistant turn (tool results, a user's follow-up): one suffix piece.
      const next = assistants[i + 1] ?? msgs.length;
      if (next === k + 1) return;
      const block = msgs.slice(k + 1, next);
      const hasNext = next < msgs.length;
      const suffix = suffixText(block, hasNext);
      const sRuns: [number, number, TurnRole][] = [[0, k + 1, roleOf(block[0])]];
      if (hasNext && facts.gen && suffix.endsWith(facts.gen)) sRuns.push([suffix.length - facts.gen.length, next, 'assistant']);
      piece(suffix, sRuns);
    });
    return { ids, message: Int32Array.from(message), role: Uint8Array.from(role), seams };
  }

  /**
   * Assistant turn k as the model wrote it: the text after the generation prompt through the end-of-turn text,
   * with [start, end) of its tool calls. Rendered as TRL's _get_tool_suffix_ids renders a block, in a dummy
   * conversation (a user turn, then this message, last), which is cheap — a template renders the turn the
   * model is writing as the last message after a user query (Qwen3 keeps its <think> block there). Where the
   * dummy render has no generation prompt to cut at, the conversation's own prefix renders are used.
   */
  function generated(msgs: readonly ChatMessage[], k: number): { text: string; call?: [number, number] } {
    const m = msgs[k];
    const cut = (t: string, start: number) => {
      const stop = eosEnd(t, start);
      return t.slice(start, stop < 0 ? t.length : stop);
    };
    const dummy = render([{ role: 'user', content: 'dummy' }, m], false, false);
    const end = lastEos(dummy);
    const at = facts.gen ? dummy.lastIndexOf(facts.gen, end < 0 ? undefined : end) : -1;
    if (at < 0) {
      const own = render(msgs.slice(0, k + 1), false);
      return { text: cut(own, commonPrefix(render(msgs.slice(0, k), true), own)) };
    }
    const start = at + facts.gen.length;
    const text = cut(dummy, start);
    if (!Array.isArray(m.tool_calls) || m.tool_calls.length === 0) return { text };
    // The calls start where the render without them departs (that character may sit inside a tag token:
    // piece() gives the whole token to the call) and end at the end-of-turn text.
    const from = commonPrefix(dummy, render([{ role: 'user', content: 'dummy' }, { ...m, tool_calls: undefined }], false, false)) - start;
    const eos = lastEos(text);
    const to = eos > from ? eos : text.length;
    return from >= 0 && from < to ? { text, call: [from, to] } : { text };
  }

  /** Attribution of `row` carried from `inc` through an alignment of row (a) against inc (b). */
  function carry(row: readonly number[], ops: TokenOp[], inc: Attributed): Attributed {
    const message = new Int32Array(row.length).fill(-1);
    const role = new Uint8Array(row.length);
    const seams = new Set<number>();
    for (const o of ops) {
      if (o.op !== 'same') continue;
      message[o.a!] = inc.message[o.b!];
      role[o.a!] = inc.role[o.b!];
      if (inc.seams.has(o.b!)) seams.add(o.a!);
    }
    // A token only in `row` takes its neighbour's turn: the previous one, else the next.
    for (let i = 0; i < row.length; i++) if (message[i] < 0 && i > 0) [message[i], role[i]] = [message[i - 1], role[i - 1]];
    for (let i = row.length - 1; i >= 0; i--) if (message[i] < 0) [message[i], role[i]] = i + 1 < row.length ? [message[i + 1], role[i + 1]] : [0, 0];
    for (let i = 1; i < row.length; i++) if (message[i] !== message[i - 1]) seams.add(i);
    return { ids: [...row], message, role, seams };
  }

  /** The differing runs of stored against one rendering, each with its cause and the loss tokens it touches. */
  function diffWay(stored: readonly number[], sAttr: Attributed, rendered: Attributed, ops: TokenOp[], lossAt: (s: number) => number): WayReport {
    const report: WayReport = { ids: rendered.ids, diffs: [], stored_tokens: 0, rendered_tokens: 0, loss_tokens: 0, by_cause: {} };
    // Stored position before each op (for runs that are render-only).
    let sPos = 0;
    let rPos = 0;
    for (let i = 0; i < ops.length; ) {
      if (ops[i].op === 'same') {
        [sPos, rPos] = [ops[i].a! + 1, ops[i].b! + 1];
        i++;
        continue;
      }
      const [s0, r0] = [sPos, rPos];
      while (i < ops.length && ops[i].op !== 'same') {
        if (ops[i].op === 'removed') sPos = ops[i].a! + 1;
        else rPos = ops[i].b! + 1;
        i++;
      }
      const [s1, r1] = [sPos, rPos];
      const storedText = tok.decode(stored.slice(s0, s1));
      const renderedText = tok.decode(rendered.ids.slice(r0, r1));
      const at = (attr: Attributed, p: number) => Math.min(Math.max(p, 0), attr.ids.length - 1);
      const [message, role] = r1 > r0 ? [rendered.message[r0], rendered.role[r0]] : [sAttr.message[at(sAttr, s0)], sAttr.role[at(sAttr, s0)]];
      const touchesTool = (attr: Attributed, a: number, b: number) => {
        for (let p = a; p < b; p++) if (TURN_ROLES[attr.role[p]] === 'tool_call') return true;
        return false;
      };
      const seamInside = (attr: Attributed, a: number, b: number) => {
        for (let p = a + 1; p < b; p++) if (attr.seams.has(p)) return true;
        return false;
      };
      const g = facts.gen;
      const cause: Cause =
        THINK.test(storedText) !== THINK.test(renderedText) ? 'think-dropped'
        : g && renderedText.includes(g) && !storedText.includes(g) ? 'generation-prompt-missing'
        : g && storedText.includes(g) && !renderedText.includes(g) ? 'generation-prompt-added'
        : touchesTool(sAttr, s0, s1) || touchesTool(rendered, r0, r1) ? 'tool-call-retokenized'
        : storedText === renderedText ? (seamInside(sAttr, s0, s1) || seamInside(rendered, r0, r1) ? 'bpe-seam' : 'retokenized')
        : 'text-differs';
      let loss = 0;
      for (let s = s0; s < s1; s++) loss += lossAt(s);
      report.diffs.push({ cause, message, role: TURN_ROLES[role], stored: [s0, s1], rendered: [r0, r1], stored_text: storedText, rendered_text: renderedText, loss_tokens: loss });
      report.stored_tokens += s1 - s0;
      report.rendered_tokens += r1 - r0;
      report.loss_tokens += loss;
      report.by_cause[cause] = (report.by_cause[cause] ?? 0) + 1;
    }
    return report;
  }
}
