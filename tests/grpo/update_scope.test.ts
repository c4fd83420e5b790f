// updateScope: what a trainer's optimizer step sums besides the batch's own gradient, from the run context in the
// trainer's names (TRL's num_processes / rank / gradient_accumulation_steps, OpenRLHF's num_processes or
// loss_batch_info.dp_size, gradient_accumulation_steps and its train.batch_size window against the batch's rows and
// run.other_samples); verl's dumps hold the whole step.
import { describe, expect, it } from 'vitest';
import { updateScope } from '../../src/grpo/step_objective.ts';

/** OpenRLHF with a window of `n` samples. */
const orl = (n: number) => ({ 'train.batch_size': n });

describe('updateScope', () => {
  it('the studio loss and a one-process, one-micro-batch run whose window is the batch: the whole step', () => {
    expect(updateScope(null, 8)).toBeNull();
    expect(updateScope({ trainer: 'trl', config: {}, run: {} }, 8)).toBeNull();
    expect(updateScope({ trainer: 'openrlhf', config: orl(8), run: {} }, 8)).toBeNull();
  });

  it('TRL: the processes missing from the batch and the micro-batches of the step', () => {
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 8, rank: 3 } }, 8)).toMatch(/averages the gradients of 8 processes \(the batch holds rank 3's rows\): /);
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 4, rank: [0, 2] } }, 8)).toMatch(/averages the gradients of 4 processes \(the batch holds ranks 0,2\)/);
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 2, rank: [0, 1] } }, 8)).toBeNull();
    const ga = updateScope({ trainer: 'trl', config: {}, run: { num_processes: 2, rank: [0, 1], gradient_accumulation_steps: 4 } }, 8);
    expect(ga).toMatch(/accumulates 4 micro-batches per process/);
    expect(ga).not.toMatch(/processes \(/);
  });

  it('OpenRLHF: dp_size from loss_batch_info when given, else num_processes; gas; a window the batch and other_samples do not fill', () => {
    expect(updateScope({ trainer: 'openrlhf', config: orl(32), run: { num_processes: 4 } }, 8)).toMatch(/^the trainer's optimizer step averages the gradients of 4 processes \(the batch holds one rank's micro-batch\) and spans train\.batch_size 32 samples, of which the batch and run\.other_samples hold 8 /);
    expect(updateScope({ trainer: 'openrlhf', config: orl(32), run: { num_processes: 4, other_samples: 24 } }, 8)).toMatch(/^the trainer's optimizer step averages the gradients of 4 processes \(the batch holds one rank's micro-batch\): /);
    expect(updateScope({ trainer: 'openrlhf', config: orl(32), run: { loss_batch_info: { dp_size: 16, batch_num_tokens: 100, global_batch_size: 8 } } }, 2)).toMatch(/of 16 processes \(the batch holds one rank's micro-batch\): /);
    expect(updateScope({ trainer: 'openrlhf', config: orl(8), run: { gradient_accumulation_steps: 2 } }, 8)).toMatch(/^the trainer's optimizer step accumulates 2 micro-batches per process/);
    // OpenRLHF's default window is 128 samples.
    expect(updateScope({ trainer: 'openrlhf', config: {}, run: {} }, 8)).toMatch(/spans train\.batch_size 128 samples, of which the batch and run\.other_samples hold 8/);
  });

  it('verl: every rank and micro-batch of the mini-batch is in the dump', () => {
    expect(updateScope({ trainer: 'verl', config: {}, run: { data_parallel_size: 8, mini_batch_index: 0 } }, 8)).toBeNull();
  });
});
