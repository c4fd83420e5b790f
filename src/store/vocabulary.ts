// The names and flags the page renders (stage ids and labels, loss aggregation names, clip bits, the
// default model's name), as the worker protocol defines them. The page imports them from here so it
// reads everything through the store layer and never reaches past it (ui → store → worker).
export { AGGREGATIONS, CLIP_HIGH, CLIP_LOW, DELTA_BINDS, STAGES, STAGE_LABELS } from '../worker/protocol.ts';
export { DEFAULT_MODEL_NAME } from '../grpo/default_task.ts';
