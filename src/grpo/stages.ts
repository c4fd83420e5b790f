// The stages of one GRPO update, in order: owned by the pipeline (src/grpo/step.ts), shared with the
// worker protocol and the UI. A module of its own so the page can import the list without pulling in
// the pipeline's GPU code.
export const STAGES = [
  'render',
  'sample',
  'reward',
  'advantages',
  'assemble',
  'policy_forward',
  'reference_forward',
  'loss',
  'backward',
  'step',
  're_evaluate',
] as const;
export type StageId = (typeof STAGES)[number];
