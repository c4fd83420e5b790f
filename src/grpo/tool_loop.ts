// The multi-turn tool-call rollout of a GRPO step, as TRL's GRPOTrainer builds it (huggingface/trl
// trl/trainer/grpo_trainer.py, `_tool_call_loop`): each sampled completion is parsed for tool calls, the tools
// run, their results are appended as `tool` messages and the model continues from the extended sequence, up to
// `max_tool_calling_iterations` rounds. The rows come out as TRL hands them to the loss: one completion per
// sample holding every generated turn and tool block, `tool_mask` 0 on tool-result tokens, the sampler's
// log-probs (0.0 on tool tokens, as TRL pads them) and the whole conversation as messages.
//
// Two ways (TOOL_LOOP_WAYS, src/grpo/tool_ways.ts), because the bug the studio must show lives in the older one:
// - concat (TRL since huggingface/trl#5242): prompt_ids + completion_ids + the tool block's suffix ids (cut
//   from a dummy conversation, `_get_tool_suffix_ids`): the sampled ids are never re-tokenized.
// - rerender (TRL before #5242): the conversation (prompt, the parsed assistant turn, the tool results) is
//   re-rendered with apply_chat_template and re-tokenized every round, so a tool call the model wrote in a
//   non-canonical spelling (compact or padded JSON) comes back in the template's canonical spelling with
//   another token count, while tool_mask was built from the sampled length: a call that comes back shorter
//   slides the mask's 1s onto the tool block (tool tokens in the loss), one that comes back longer slides its
//   0s onto the call's last tokens (the call out of the loss), and where the re-rendered call is shorter by
//   more than the tool block is long, tool_mask ends up longer than completion_ids and TRL fails in
//   _compute_loss (huggingface/trl#5145, the seed report ../shared/seeds/003_*). Those rows are recorded (`retokenized`, `mask_overflow`) so the step
//   can name them instead of computing on a mask that does not fit.
// Pure except for the two callbacks (the model's next turn, the tools); the studio's sample stage drives it.
import type { ChatMessage } from '../io/batch.ts';
import type { FinishReason } from '../model/generate.ts';
import { suffixDummy } from '../tokenize/roundtrip.ts';
import type { ToolLoopWay } from './tool_ways.ts';
import type { RenderOptions, Tokenizer } from '../tokenize/tokenizer.ts';

/** A tool call as the chat template and TRL hold it. */
export interface ToolCall {
  type: 'function';
  function: { name: string; arguments: Record<string, unknown> };
}

/** An assistant turn parsed as TRL's parse_response does with the Qwen3 response schema. */
export interface ParsedTurn extends ChatMessage {
  role: 'assistant';
  content: string;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

const TOOL_CALL = /<tool_call>\s*([\s\S]+?)\s*<\/tool_call>/g;

/**
 * Splits a generated turn's text (special tokens kept) into reasoning, content and tool calls, as TRL's
 * `parse_response` with its Qwen3 schema (huggingface/trl trl/chat_template_utils.py `qwen3_schema`): a
 * leading <think> block, the content before the first <tool_call> (one "\n" before it dropped), each
 * <tool_call> body parsed as JSON {name, arguments}, a trailing end-of-turn text removed. A call that is not
 * such JSON makes the whole turn plain text (TRL's fallback), so it runs no tool.
 */
export function parseAssistantTurn(text: string, eosText: string): ParsedTurn {
  let rest = eosText && text.endsWith(eosText) ? text.slice(0, -eosText.length) : text;
  let reasoning: string | undefined;
  const think = /^<think>\n?([\s\S]*?)\n?<\/think>\s*/.exec(rest);
  if (think) {
    reasoning = think[1].trim() ? think[1] : undefined;
    rest = rest.slice(think[0].length);
  }
  const at = rest.indexOf('<tool_call>');
  const plain: ParsedTurn = { role: 'assistant', content: rest, ...(reasoning !== undefined ? { reasoning_content: reasoning } : {}) };
  if (at < 0) return plain;
  const calls: ToolCall[] = [];
  for (const m of rest.slice(at).matchAll(TOOL_CALL)) {
    let body: unknown;
    try {
      body = JSON.parse(m[1]);
    } catch {
      return plain;
    }
    const b = body as { name?: unknown; arguments?: unknown };
    if (typeof b !== 'object' || b === null || typeof b.name !== 'string' || typeof b.arguments !== 'object' || b.arguments === null || Array.isArray(b.arguments)) return plain;
    calls.push({ type: 'function', function: { name: b.name, arguments: b.arguments as Record<string, unknown> } });
  }
  if (calls.length === 0) return plain;
  return { ...plain, content: rest.slice(0, at).replace(/\n$/, ''), tool_calls: calls };
}

/** One tool call to run: the sample it belongs to, the function and its arguments. */
export interface PendingCall {
  sample: number;
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * Runs the calls (in the studio: the sandbox worker) and gives each one's result as the `tool` message's
 * content: the function's return value as a string, or TRL's `{'error': '…'}` for an unknown tool, a throw
 * or a timeout.
 */
export type ToolRunner = (calls: readonly PendingCall[]) => Promise<string[]>;

/** The model's next turn for each given sequence (one row each, G = 1): the sampled ids and their log-probs. */
export type TurnGenerator = (sequences: number[][], iteration: number, max_new_tokens: number) => Promise<{ completion_ids: number[][]; logps: number[][]; finish_reason: FinishReason[] }>;

export interface ToolLoopSettings {
  way: ToolLoopWay;
  /** TRL's max_tool_calling_iterations (None: no limit — the completion budget still ends the loop). */
  max_tool_calling_iterations: number;
  /** The completion budget over all turns and tool blocks (TRL's max_completion_length). */
  max_completion_length: number;
}

export interface ToolEnv {
  tokenizer: Tokenizer;
  /** The render of the prompts: the batch's `tools` and template kwargs (the rerender way re-renders with them). */
  render: RenderOptions;
  /** The end-of-turn token the suffix cut aligns to (TRL: the tokenizer's eos_token_id). */
  eos_token_id: number;
  run: ToolRunner;
}

/** A stretch of the final completion whose ids are not the sampled ones (the rerender way). */
export interface Retokenized {
  iteration: number;
  /** [start, end) in the final completion where the re-rendered ids differ from the sampled ones. */
  start: number;
  end: number;
  /** How many tokens the model sampled for the turns re-rendered, and how many the re-render has. */
  sampled_tokens: number;
  rendered_tokens: number;
}

export interface ToolRow {
  completion_ids: number[];
  /** TRL's tool_mask: 1 on the model's tokens, 0 on tool results. Longer than completion_ids where `mask_overflow`. */
  tool_mask: number[];
  /** The sampler's log-probs, 0.0 on tool-result tokens (TRL pads them so). */
  logps: number[];
  /** The whole conversation: the prompt's messages, each parsed assistant turn, each tool result. */
  messages: ChatMessage[];
  /** How the last generated turn ended: its EOS, or the length limit (the completion budget included). */
  finish_reason: FinishReason;
  tool_calls: number;
  tool_failures: number;
  retokenized: Retokenized[];
  /** The rerender way built a tool_mask longer than the completion (huggingface/trl#5145): what TRL then fails on. */
  mask_overflow: { iteration: number; mask: number; completion: number } | null;
}

/** The first turn as sampled, per row, and the prompts it continues. */
export interface ToolLoopStart {
  prompt_ids: number[][]; // (B) each row's prompt
  prompt_messages: ChatMessage[][]; // (B)
  completion_ids: number[][]; // (B) the first sampled turn
  logps: number[][]; // (B)
  finish_reason: FinishReason[]; // (B)
}

/** TRL's `{'error': '…'}` tool result (a Python dict's str()). */
export const toolError = (message: string): string => `{'error': '${message.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'}`;

/**
 * TRL's `_get_tool_suffix_ids`: the ids a tool block adds after an assistant turn, cut from a dummy
 * conversation (src/tokenize/roundtrip.ts suffixDummy) rendered with the block and a generation prompt, after
 * as many end-of-turn ids as the dummy alone renders. TRL trims the dummy's ids at its last end-of-turn id and
 * requires them to be a prefix of the full render; Qwen3's own template breaks that (it writes an empty <think>
 * block in an assistant turn only when it is the last message), so TRL swaps in its prefix-preserving training
 * template (trl/chat_template_utils.py get_training_chat_template). Cutting at the end-of-turn count gives the
 * suffix either template gives, so the tokenizer's own template serves.
 */
export function toolSuffixIds(env: Pick<ToolEnv, 'tokenizer' | 'render' | 'eos_token_id'>, toolMessages: readonly ChatMessage[]): number[] {
  const dummy = suffixDummy(toolMessages[0]);
  const opts = { template_kwargs: env.render.template_kwargs, chat_template: env.render.chat_template };
  const turns = env.tokenizer.renderChat(dummy, { ...opts, add_generation_prompt: false }).ids.filter((id) => id === env.eos_token_id).length;
  const full = env.tokenizer.renderChat([...dummy, ...toolMessages], { ...opts, add_generation_prompt: true }).ids;
  let at = 0;
  for (let k = turns; k > 0; at++) {
    if (at >= full.length) throw new RangeError(`the chat template renders ${turns} end-of-turn tokens for a dummy conversation but fewer once a tool result follows: no tool block suffix can be cut (TRL raises "Unexpected tokenization" here)`);
    if (full[at] === env.eos_token_id) k--;
  }
  return full.slice(at);
}

/**
 * Runs the tool-call loop over every row of a sampled batch (TRL's _tool_call_loop, either way) and returns
 * the rows as the trainer scores them.
 */
export async function toolCallLoop(start: ToolLoopStart, generate: TurnGenerator, env: ToolEnv, s: ToolLoopSettings): Promise<ToolRow[]> {
  const eosText = env.tokenizer.decode([env.eos_token_id]);
  const rows: ToolRow[] = start.completion_ids.map((ids, b) => ({
    completion_ids: ids.slice(),
    tool_mask: ids.map(() => 1),
    logps: start.logps[b].slice(),
    messages: [...start.prompt_messages[b]],
    finish_reason: start.finish_reason[b],
    tool_calls: 0,
    tool_failures: 0,
    retokenized: [],
    mask_overflow: null,
  }));
  let turns = rows.map((r) => parseAssistantTurn(env.tokenizer.decode(r.completion_ids), eosText));
  rows.forEach((r, b) => r.messages.push(turns[b]));
  let active = rows.flatMap((_, b) => (turns[b].tool_calls ? [b] : []));
  for (let iteration = 0; active.length > 0 && iteration < s.max_tool_calling_iterations; iteration++) {
    // Run every active row's calls in one batch (the sandbox starts once).
    const calls = active.flatMap((b) => turns[b].tool_calls!.map((c) => ({ sample: b, name: c.function.name, arguments: c.function.arguments })));
    const results = await env.run(calls);
    const toolMessages = new Map<number, ChatMessage[]>(active.map((b) => [b, []]));
    calls.forEach((c, i) => {
      rows[c.sample].tool_calls++;
      if (results[i].startsWith("{'error'")) rows[c.sample].tool_failures++;
      toolMessages.get(c.sample)!.push({ role: 'tool', name: c.name, content: results[i] });
    });
    // The next turn's input per active row, and the tool block's length in it.
    const inputs: number[][] = [];
    const kept: number[] = [];
    for (const b of active) {
      const r = rows[b];
      const before = r.messages.length;
      r.messages.push(...toolMessages.get(b)!);
      const P = start.prompt_ids[b].length;
      const seq = s.way === 'concat' ? [...start.prompt_ids[b], ...r.completion_ids, ...toolSuffixIds(env, toolMessages.get(b)!)] : env.tokenizer.renderChat(r.messages, { ...env.render, add_generation_prompt: true }).ids;
      if (s.way === 'rerender' && start.prompt_ids[b].some((id, i) => seq[i] !== id)) throw new RangeError(`sample ${b}: the chat template is not prefix-preserving: the re-rendered conversation does not start with the prompt's ids (TRL before #5242 raises here)`);
      if (seq.length - P > s.max_completion_length) {
        // The tool result would pass the completion budget: the row leaves the loop as it is (TRL rolls back).
        r.messages.length = before;
        continue;
      }
      inputs.push(seq);
      kept.push(b);
    }
    if (kept.length === 0) break;
    // Each row may generate up to what is left of its budget (TRL generates more and cuts; the draws are the same).
    const budget = Math.max(...kept.map((b, k) => s.max_completion_length - (inputs[k].length - start.prompt_ids[b].length)));
    const next = budget > 0 ? await generate(inputs, iteration + 1, budget) : { completion_ids: inputs.map(() => []), logps: inputs.map(() => []), finish_reason: inputs.map((): FinishReason => 'length') };
    const nextTurns: ParsedTurn[] = [];
    kept.forEach((b, k) => {
      const r = rows[b];
      const P = start.prompt_ids[b].length;
      const seq = inputs[k];
      const budget = s.max_completion_length - (seq.length - P);
      const post = next.completion_ids[k].slice(0, Math.max(0, budget));
      const postLogps = next.logps[k].slice(0, post.length);
      r.finish_reason = post.length < next.completion_ids[k].length || post.length === 0 ? 'length' : next.finish_reason[k];
      // TRL's update, either way: the tool block is what the new input holds beyond prompt + completion so far.
      const toolLength = seq.length - P - r.completion_ids.length;
      if (s.way === 'rerender') noteRetokenized(r, seq.slice(P), env.eos_token_id, iteration);
      r.tool_mask.push(...new Array<number>(Math.max(0, toolLength)).fill(0), ...post.map(() => 1));
      r.logps.push(...new Array<number>(Math.max(0, toolLength)).fill(0), ...postLogps);
      r.completion_ids = [...seq.slice(P), ...post];
      if (r.tool_mask.length !== r.completion_ids.length && !r.mask_overflow) r.mask_overflow = { iteration, mask: r.tool_mask.length, completion: r.completion_ids.length };
      const turn = parseAssistantTurn(env.tokenizer.decode(post), eosText);
      if (post.length > 0) r.messages.push(turn);
      nextTurns[b] = turn;
    });
    turns = nextTurns;
    active = kept.filter((b) => nextTurns[b]?.tool_calls);
  }
  return rows;
}

/**
 * Records where the re-rendered ids of the turns so far differ from what was sampled (the rerender way). The
 * re-rendered turns end at the same count of end-of-turn tokens as the sampled ones; the tool block follows.
 */
function noteRetokenized(r: ToolRow, rerendered: readonly number[], eos: number, iteration: number): void {
  const sampled = r.completion_ids;
  let start = 0;
  while (start < sampled.length && sampled[start] === rerendered[start]) start++;
  if (start === sampled.length) return;
  let turnsEnd = 0;
  for (let k = sampled.filter((id) => id === eos).length; k > 0 && turnsEnd < rerendered.length; turnsEnd++) if (rerendered[turnsEnd] === eos) k--;
  let i = sampled.length;
  let j = turnsEnd;
  while (i > start && j > start && sampled[i - 1] === rerendered[j - 1]) {
    i--;
    j--;
  }
  r.retokenized.push({ iteration, start, end: j, sampled_tokens: sampled.length, rendered_tokens: turnsEnd });
}
