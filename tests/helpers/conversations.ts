// Multi-turn fixtures for the round-trip proof and the Doctor's turn rules (issue 25): conversations on the
// real Qwen3 and Llama 3 templates with their rendered text written out by hand, piece by piece, so a test
// builds the stored ids as a trainer would (each piece tokenized apart: TRL's _tool_call_loop concatenation)
// without asking the code under test.
import type { ChatMessage } from '../../src/io/batch.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';

/** The one tool of the Qwen3 fixtures, and its schema as the template's `tojson` writes it (Python separators). */
export const TOOLS = [{ type: 'function', function: { name: 'multiply', description: 'Multiply two numbers', parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } } }];
const TOOLS_JSON = '{"type": "function", "function": {"name": "multiply", "description": "Multiply two numbers", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}';

/** Qwen3's system block when tools are given and the conversation has no system message. */
export const QWEN_TOOLS_SYSTEM = `<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n${TOOLS_JSON}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n`;

export const QWEN_EOS = 151645; // <|im_end|>
export const LLAMA_EOT = 128009; // <|eot_id|>

/** One piece of a stored row: its text, whether it is completion (else prompt), and its loss weight there. */
export interface Piece {
  text: string;
  completion: boolean;
  /** completion_mask × tool_mask on the piece (1: trained, 0: masked, as a tool response). */
  loss: 0 | 1;
}

/** Stored ids as a trainer concatenates separately tokenized pieces, with completion_mask and tool_mask. */
export function storedRow(tok: Tokenizer, pieces: Piece[]) {
  const prompt: number[] = [];
  const completion: number[] = [];
  const tool_mask: number[] = [];
  for (const p of pieces) {
    const ids = tok.encode(p.text);
    if (!p.completion) prompt.push(...ids);
    else {
      completion.push(...ids);
      tool_mask.push(...ids.map(() => p.loss));
    }
  }
  return { prompt, completion, completion_mask: completion.map(() => 1), tool_mask, ids: [...prompt, ...completion], loss: tool_mask };
}

/** Qwen3, one tool call then the answer, reasoning kept on both turns (one user query: nothing dropped). */
export function qwenToolConversation(): { messages: ChatMessage[]; pieces: Piece[] } {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'What is 3 times 4?' },
    { role: 'assistant', content: '', reasoning_content: 'I will use the tool.', tool_calls: [{ type: 'function', function: { name: 'multiply', arguments: { a: 3, b: 4 } } }] },
    { role: 'tool', name: 'multiply', content: '12' },
    { role: 'assistant', content: 'The answer is 12.', reasoning_content: 'The tool said 12.' },
  ];
  const pieces: Piece[] = [
    { text: `${QWEN_TOOLS_SYSTEM}<|im_start|>user\nWhat is 3 times 4?<|im_end|>\n<|im_start|>assistant\n`, completion: false, loss: 0 },
    { text: '<think>\nI will use the tool.\n</think>\n\n', completion: true, loss: 1 },
    { text: '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>', completion: true, loss: 1 },
    { text: '\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n', completion: true, loss: 0 },
    { text: '<think>\nThe tool said 12.\n</think>\n\nThe answer is 12.<|im_end|>', completion: true, loss: 1 },
  ];
  return { messages, pieces };
}

/** Qwen3, two user queries: the first answer's reasoning is dropped by the template in a full render. */
export function qwenTwoQueries(): { messages: ChatMessage[]; pieces: Piece[] } {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'Name a prime.' },
    { role: 'assistant', content: 'Seven.', reasoning_content: 'Small primes: 2, 3, 5, 7.' },
    { role: 'user', content: 'Another one?' },
    { role: 'assistant', content: 'Eleven.', reasoning_content: 'Next after 7 is 11.' },
  ];
  const pieces: Piece[] = [
    { text: '<|im_start|>user\nName a prime.<|im_end|>\n<|im_start|>assistant\n', completion: false, loss: 0 },
    { text: '<think>\nSmall primes: 2, 3, 5, 7.\n</think>\n\n', completion: true, loss: 1 },
    { text: 'Seven.<|im_end|>', completion: true, loss: 1 },
    { text: '\n<|im_start|>user\nAnother one?<|im_end|>\n<|im_start|>assistant\n', completion: true, loss: 0 },
    { text: '<think>\nNext after 7 is 11.\n</think>\n\nEleven.<|im_end|>', completion: true, loss: 1 },
  ];
  return { messages, pieces };
}

/** Llama 3, a system prompt and two user turns (no tools: its template has none). */
export function llamaTwoTurns(): { messages: ChatMessage[]; pieces: Piece[] } {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Capital of France?' },
    { role: 'assistant', content: 'Paris.' },
    { role: 'user', content: 'And of Spain?' },
    { role: 'assistant', content: 'Madrid.' },
  ];
  const header = (role: string) => `<|start_header_id|>${role}<|end_header_id|>\n\n`;
  const pieces: Piece[] = [
    { text: `<|begin_of_text|>${header('system')}Be brief.<|eot_id|>${header('user')}Capital of France?<|eot_id|>${header('assistant')}`, completion: false, loss: 0 },
    { text: 'Paris.<|eot_id|>', completion: true, loss: 1 },
    { text: `${header('user')}And of Spain?<|eot_id|>${header('assistant')}`, completion: true, loss: 0 },
    { text: 'Madrid.<|eot_id|>', completion: true, loss: 1 },
  ];
  return { messages, pieces };
}
