// The trainer objectives by name: `grpo-studio loss` and the step pipeline pick one from a case's or
// batch's `trainer`.
import type { TrainerId } from '../settings/types.ts';
import type { TrainerLoss } from './types.ts';
import { trlLoss } from './trl.ts';
import { verlLoss } from './verl.ts';
import { openrlhfLoss } from './openrlhf.ts';

export const TRAINER_LOSSES: Record<TrainerId, TrainerLoss> = { trl: trlLoss, verl: verlLoss, openrlhf: openrlhfLoss };
