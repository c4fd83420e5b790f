// openrlhf objective on one micro-batch (placeholder: being implemented).
import type { TrainerLoss } from './types.ts';

export const openrlhfLoss: TrainerLoss = async () => {
  throw new Error('openrlhf objective: not implemented yet');
};
