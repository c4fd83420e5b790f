// The ways a multi-turn tool loop builds each next turn's input (src/grpo/tool_loop.ts has the why): a leaf
// of names and descriptions, so the page's loop selector and the loop read one table.
export const TOOL_LOOP_WAYS = {
  concat: 'TRL since huggingface/trl#5242: prompt + sampled completion + the tool block\'s suffix ids, no re-tokenization',
  rerender: 'TRL before #5242: the conversation re-rendered and re-tokenized each round (huggingface/trl#5145)',
} as const;
export type ToolLoopWay = keyof typeof TOOL_LOOP_WAYS;
