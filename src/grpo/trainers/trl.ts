// trl objective on one micro-batch (placeholder: being implemented).
import type { TrainerLoss } from './types.ts';

export const trlLoss: TrainerLoss = async () => {
  throw new Error('trl objective: not implemented yet');
};
