// The names and flags the page renders: stage ids and labels (the worker protocol's), loss aggregation
// names and clip bits (the shared constants of src/kernels/types.ts), the embedded
// tasks and the tool loop's ways. The page
// imports them from here so it reads everything through the store layer (ui → store → worker), and
// groupLabel (the group a sample belongs to: its label, or ⌊i / G⌋) for the same reason; the trainer
// settings tables and the effective-mask factor names for the trainer preset form and overlays; the new
// LoRA adapter's fields for the create form.
export { AGGREGATIONS, CLIP_HIGH, CLIP_LOW, DELTA_BINDS } from '../kernels/types.ts';
export { MASK_FACTORS, STAGES, STAGE_LABELS } from '../bridge/protocol.ts';
export { TASKS, TASK_IDS, type TaskId } from '../grpo/tasks.ts';
export { TOOL_LOOP_WAYS, type ToolLoopWay } from '../grpo/tool_ways.ts';
export { groupLabel } from '../io/batch.ts';
export { SCOPES, TRAINERS, type Scope, type TrainerId, type SettingSpec } from '../grpo/settings/types.ts';
export { TRAINER_TABLES } from '../grpo/settings/trainers.ts';
export { checkSetting } from '../grpo/settings/table.ts';
export { LORA_CREATE_FIELDS } from '../model/lora_fields.ts';
export { configTable, rowOf, runTable, settingOf, type EffectiveSettings, type Provenance } from '../grpo/settings/effective.ts';
export { baseKindOf, effectiveOf, lossTypeOf, ranValue, trainerOf, whatIfOf } from './derived.ts';
