// verl objective on one micro-batch (placeholder: being implemented).
import type { TrainerLoss } from './types.ts';

export const verlLoss: TrainerLoss = async () => {
  throw new Error('verl objective: not implemented yet');
};
