// The tool-calling task and its embedded model public/models/tiny-tool (trained by
// `npm run train:tool`, scripts/train-default.ts): two-digit multiplication through a tool. The user asks
// "What is 37 * 45?", the tools (TOOL_TASK_TOOLS, a `multiply` JSON function schema, passed to the chat
// template as HF's apply_chat_template(tools=…)) are listed in the system prompt (tiny-tool's template is
// Qwen3's with a one-line-per-tool tools prompt, scripts/make-default-tokenizer.ts), and the conversation
// is multi-turn, as TRL's GRPOTrainer `tools` loop runs it:
//   1. the model calls the tool: `<tool_call>\n{"name": "multiply", "arguments": {"a": 37, "b": 45}}\n</tool_call><|im_end|>`
//   2. the loop runs the call (TOOL_TASK_SOURCE) and appends the tool message {role: tool, content: "1665"},
//      which the template renders as a user turn holding `<tool_response>\n1665\n</tool_response>`;
//   3. the model answers `1665<|im_end|>` (or "The answer is 1665.").
// Why this task: it is the smallest conversation where the tool-call bug class of real GRPO runs shows.
// The model was fine-tuned on three JSON spellings of the call — canonical, as the template's `tojson`
// writes it (70%), compact (15%) and padded with extra spaces and newlines (15%, as in TRL #5145) — so a
// sampled group holds all three. A loop that parses the call and re-renders it canonically re-tokenizes
// the compact and padded ones to other lengths, and the completion's masks no longer line up with its ids.
// It was stopped early (as tiny-adder) so that a group of 8 holds right and wrong calls and answers.
// Pure: shared by the training script, the tokenizer builder, the studio and the tests, so the text the
// model was trained on and the text it is shown are the same.
import type { BatchConfig, ChatMessage } from '../io/batch.ts';
import type { LossType } from '../kernels/types.ts';
import { DEFAULT_GRPO_CONFIG, SENTENCE_STYLE_FRACTION, type AdditionProblem, type TaskPrompt } from './default_task.ts';
import type { RewardSpec } from './rewards.ts';

export const TOOL_MODEL_NAME = 'tiny-tool';
export const TOOL_MODEL_PATH = `models/${TOOL_MODEL_NAME}`;

/** a × b with a, b two-digit: the operands and the held-out split are default_task's (allProblems, isHeldOut). */
export type MultiplicationProblem = AdditionProblem;

/** The tools of the task, as HF's apply_chat_template(tools=…) takes them. */
export const TOOL_TASK_TOOLS: Record<string, unknown>[] = [
  {
    type: 'function',
    function: {
      name: 'multiply',
      description: 'Multiply two integers.',
      parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] },
    },
  },
];

/** The tool functions as the studio's sandbox runs them: an object of name → function of the call's arguments. */
export const TOOL_TASK_SOURCE = '({ multiply: ({ a, b }) => a * b })';

export function multiplicationQuestion(p: MultiplicationProblem): string {
  return `What is ${p.a} * ${p.b}?`;
}

/** The reference answer: the product, as the tool returns it and as the model was mostly fine-tuned to answer. */
export function multiplicationAnswer(p: MultiplicationProblem): string {
  return String(p.a * p.b);
}

/** The other answer style of fine-tuning (SENTENCE_STYLE_FRACTION of examples, as tiny-adder). */
export function multiplicationSentence(p: MultiplicationProblem): string {
  return `The answer is ${p.a * p.b}.`;
}

export function multiplicationMessages(p: MultiplicationProblem): ChatMessage[] {
  return [{ role: 'user', content: multiplicationQuestion(p) }];
}

/** How the model writes the call's JSON. */
export type CallSpelling = 'canonical' | 'compact' | 'padded';

/** Shares of the spellings in fine-tuning (they sum to 1). */
export const CALL_SPELLINGS: readonly { spelling: CallSpelling; fraction: number }[] = [
  { spelling: 'canonical', fraction: 0.7 },
  { spelling: 'compact', fraction: 0.15 },
  { spelling: 'padded', fraction: 0.15 },
];

/** The call's JSON: canonical is Python json.dumps (the template's `tojson`), compact has no spaces, padded is TRL #5145's shape. */
export function callJson(p: MultiplicationProblem, spelling: CallSpelling): string {
  switch (spelling) {
    case 'canonical':
      return `{"name": "multiply", "arguments": {"a": ${p.a}, "b": ${p.b}}}`;
    case 'compact':
      return JSON.stringify({ name: 'multiply', arguments: { a: p.a, b: p.b } });
    case 'padded':
      return `{\n  "name"  :  "multiply",\n  "arguments"  :  {\n    "a"  :  ${p.a},\n    "b"  :  ${p.b}\n  }\n}`;
  }
}

/** The assistant's first turn as generated (before <|im_end|>): Qwen3's tool-call block around the JSON. */
export function callText(p: MultiplicationProblem, spelling: CallSpelling): string {
  return `<tool_call>\n${callJson(p, spelling)}\n</tool_call>`;
}

/** The first assistant turn as the tool loop stores it after parsing the call (OpenAI / HF tool_calls form). */
export function toolCallMessage(p: MultiplicationProblem): ChatMessage {
  return { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'multiply', arguments: { a: p.a, b: p.b } } }] };
}

/** The tool's result message, as the loop appends it. */
export function toolResultMessage(p: MultiplicationProblem): ChatMessage {
  return { role: 'tool', name: 'multiply', content: multiplicationAnswer(p) };
}

/** The whole conversation of one example: question, call, tool result, answer (bare or sentence). */
export function toolConversation(p: MultiplicationProblem, sentence = false): ChatMessage[] {
  return [...multiplicationMessages(p), toolCallMessage(p), toolResultMessage(p), { role: 'assistant', content: sentence ? multiplicationSentence(p) : multiplicationAnswer(p) }];
}

/** What renders a conversation with the model's chat template: a Tokenizer (src/tokenize/tokenizer.ts). */
export interface ChatRenderer {
  applyChatTemplate(messages: ChatMessage[], opts: { add_generation_prompt: boolean; tools: object[] }): string;
}

/** One piece of a training sequence: its text and whether the loss is taken on it (assistant text: yes). */
export interface TextPiece {
  text: string;
  trained: boolean;
}

/** What the template writes around the model's turns: the prompt, and the tool block after the call. */
export interface ToolFrame {
  /** Tools system prompt, the question, the generation prompt. */
  prompt: string;
  /** From after the call's <|im_end|> to the next generation prompt: the tool message as the template renders it. */
  toolBlock: string;
}

/** Renders the frame of a problem's conversation (it does not depend on how the call or answer are spelled). */
export function toolFrame(tok: ChatRenderer, p: MultiplicationProblem): ToolFrame {
  const tools = TOOL_TASK_TOOLS;
  const prompt = tok.applyChatTemplate(multiplicationMessages(p), { add_generation_prompt: true, tools });
  const withTool = tok.applyChatTemplate([...multiplicationMessages(p), toolCallMessage(p), toolResultMessage(p)], { add_generation_prompt: true, tools });
  // The template writes the stored call canonically, right after the generation prompt.
  const call = callText(p, 'canonical') + EOS_TEXT;
  if (!withTool.startsWith(prompt + call)) throw new Error('the chat template does not render the tool call right after the prompt');
  return { prompt, toolBlock: withTool.slice(prompt.length + call.length) };
}

/**
 * The text of one example as the tool loop builds it, piece by piece: the prompt, the sampled call with
 * <|im_end|>, the tool block the loop appends, and the answer with <|im_end|>. Only the two assistant
 * pieces are trained; the prompt is the GRPO prompt, the rest the completion.
 */
export function toolExamplePieces(frame: ToolFrame, p: MultiplicationProblem, spelling: CallSpelling, sentence: boolean): TextPiece[] {
  return [
    { text: frame.prompt, trained: false },
    { text: callText(p, spelling) + EOS_TEXT, trained: true },
    { text: frame.toolBlock, trained: false },
    { text: (sentence ? multiplicationSentence(p) : multiplicationAnswer(p)) + EOS_TEXT, trained: true },
  ];
}

/** Every (spelling, answer style) variant of an example with its share in fine-tuning. */
export function toolVariants(): { spelling: CallSpelling; sentence: boolean; fraction: number }[] {
  return CALL_SPELLINGS.flatMap(({ spelling, fraction }) => [false, true].map((sentence) => ({ spelling, sentence, fraction: fraction * (sentence ? SENTENCE_STYLE_FRACTION : 1 - SENTENCE_STYLE_FRACTION) })));
}

/** The template's end-of-turn text (Qwen3's EOS). */
const EOS_TEXT = '<|im_end|>';

/** The prompts preloaded for the task: held-out products, 3- and 4-digit (checked by a test). */
export const TOOL_PROBLEMS: readonly MultiplicationProblem[] = [
  { a: 37, b: 48 },
  { a: 12, b: 23 },
  { a: 86, b: 91 },
  { a: 25, b: 34 },
];

export const TOOL_PROMPTS: readonly TaskPrompt[] = TOOL_PROBLEMS.map((p) => ({ messages: multiplicationMessages(p), answer: multiplicationAnswer(p) }));

/**
 * The final assistant turn of a completion: the text after the last `</tool_response>` (all of it if the
 * model never called the tool), without special tokens (kept or skipped by the decoder) or the
 * generation prompt's `assistant` line. JavaScript source, so the rewards below can run it in the sandbox.
 */
const FINAL_TURN = `(c) => { const i = c.lastIndexOf('</tool_response>'); return (i < 0 ? c : c.slice(i + 16)).replace(/<\\|[a-z_]+\\|>/g, '').replace(/^\\s*assistant\\s*\\n/, '').trim(); }`;

/**
 * The preloaded rewards. Both read the whole multi-turn completion (call, tool block, answer) as the
 * studio decodes it. correctness: the final turn is exactly the product (the sentence style scores 0, as
 * on tiny-adder). tool_call: the completion holds a <tool_call> whose JSON (any spelling) calls multiply
 * with arguments whose product is the answer.
 */
export const TOOL_REWARDS: readonly RewardSpec[] = [
  { kind: 'js', name: 'correctness', weight: 1.0, enabled: true, timeout_ms: 1000, source: `(s) => (${FINAL_TURN})(s.completion) === s.answer ? 1 : 0` },
  {
    kind: 'js',
    name: 'tool_call',
    weight: 0.2,
    enabled: true,
    timeout_ms: 1000,
    source: `(s) => { const m = /<tool_call>([\\s\\S]*?)<\\/tool_call>/.exec(s.completion); if (!m) return 0; try { const c = JSON.parse(m[1]); return c.name === 'multiply' && String(c.arguments.a * c.arguments.b) === s.answer ? 1 : 0; } catch { return 0; } }`,
  },
];

/**
 * The studio's settings on this task: tiny-adder's, with the tool loop on (TRL's
 * max_tool_calling_iterations; the task needs one call) and room for the longest completion the model
 * was trained on: a padded call (48 tokens), the tool block (17) and a sentence (10) are 75 tokens.
 */
export const TOOL_GRPO_CONFIG: BatchConfig & { num_generations: number; learning_rate: number; max_grad_norm: number; loss_type: LossType; max_tool_calling_iterations: number } = {
  ...DEFAULT_GRPO_CONFIG,
  max_completion_length: 96,
  max_tool_calling_iterations: 2,
};
