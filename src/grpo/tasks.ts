// The studio's embedded tasks, one row each: the model shipped for it under public/models/, its prompts,
// rewards and sampling, and its tools where the rollout is multi-turn. The page's task choice, its stored
// defaults and the tests read this one table, so a task's prompts are always shown with the model trained on
// them. addition: two-digit sums, one turn (src/grpo/default_task.ts, tiny-adder). multiply-tool: two-digit
// products through a `multiply` tool over TRL's tool-call loop (src/grpo/tool_task.ts, tiny-tool).
import type { RewardSpec } from './rewards.ts';
import { DEFAULT_GRPO_CONFIG, DEFAULT_MODEL_NAME, DEFAULT_PROMPTS, DEFAULT_REWARDS, type TaskPrompt } from './default_task.ts';
import { TOOL_GRPO_CONFIG, TOOL_MODEL_NAME, TOOL_PROMPTS, TOOL_REWARDS, TOOL_TASK_SOURCE, TOOL_TASK_TOOLS } from './tool_task.ts';

/** A task's GRPO settings (TRL's names): the page's preset for its prompt set (src/bridge/settings.ts taskLayer). */
type TaskConfig = typeof DEFAULT_GRPO_CONFIG;

export interface TaskSpec {
  label: string;
  config: TaskConfig;
  /** The embedded model's folder name under public/models/. */
  model: string;
  prompts: readonly TaskPrompt[];
  rewards: readonly RewardSpec[];
  num_generations: number;
  temperature: number;
  max_completion_length: number;
  /** The tools of a multi-turn rollout (schemas for the template, functions as sandbox source), or null. */
  tools: { schemas: Record<string, unknown>[]; source: string; max_tool_calling_iterations: number } | null;
}

/** The tool task's settings without the tool loop's bound, which is the tools form's (TaskSpec.tools). */
const { max_tool_calling_iterations: _bound, ...TOOL_LOSS_CONFIG } = TOOL_GRPO_CONFIG;

/** The sampling a task's GRPO config sets (TRL's names; the sampler's temperature 1 where it sets none). */
const sampling = (c: TaskConfig) => ({ num_generations: c.num_generations, temperature: c.temperature ?? 1, max_completion_length: c.max_completion_length! });

export const TASKS = {
  addition: { label: 'Addition (tiny-adder, one turn)', config: DEFAULT_GRPO_CONFIG, model: DEFAULT_MODEL_NAME, prompts: DEFAULT_PROMPTS, rewards: DEFAULT_REWARDS, ...sampling(DEFAULT_GRPO_CONFIG), tools: null },
  'multiply-tool': {
    label: 'Multiplication with a tool (tiny-tool, multi-turn)',
    config: TOOL_LOSS_CONFIG,
    model: TOOL_MODEL_NAME,
    prompts: TOOL_PROMPTS,
    rewards: TOOL_REWARDS,
    ...sampling(TOOL_GRPO_CONFIG),
    tools: { schemas: TOOL_TASK_TOOLS, source: TOOL_TASK_SOURCE, max_tool_calling_iterations: TOOL_GRPO_CONFIG.max_tool_calling_iterations },
  },
} as const satisfies Record<string, TaskSpec>;

export type TaskId = keyof typeof TASKS;
export const TASK_IDS = Object.keys(TASKS) as TaskId[];
export const DEFAULT_TASK: TaskId = 'addition';

/** The embedded model folder of a task, relative to the site root (public/ in the repository). */
export const taskModelPath = (id: TaskId): string => `models/${TASKS[id].model}`;
