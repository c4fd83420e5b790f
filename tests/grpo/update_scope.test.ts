// updateScope: what a trainer's optimizer step sums besides the batch's own gradient, from the run context in the
// trainer's names (TRL's num_processes / rank / gradient_accumulation_steps, OpenRLHF's num_processes or
// loss_batch_info.dp_size and gradient_accumulation_steps); verl's dumps hold the whole step.
import { describe, expect, it } from 'vitest';
import { updateScope } from '../../src/grpo/step_objective.ts';

describe('updateScope', () => {
  it('the studio loss and a one-process, one-micro-batch run: the whole step', () => {
    expect(updateScope(null)).toBeNull();
    expect(updateScope({ trainer: 'trl', config: {}, run: {} })).toBeNull();
    expect(updateScope({ trainer: 'openrlhf', config: {}, run: {} })).toBeNull();
  });

  it('TRL: the processes missing from the batch and the micro-batches of the step', () => {
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 8, rank: 3 } })).toMatch(/averages the gradients of 8 processes \(the batch holds rank 3's rows\): /);
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 4, rank: [0, 2] } })).toMatch(/averages the gradients of 4 processes \(the batch holds ranks 0,2\)/);
    expect(updateScope({ trainer: 'trl', config: {}, run: { num_processes: 2, rank: [0, 1] } })).toBeNull();
    const ga = updateScope({ trainer: 'trl', config: {}, run: { num_processes: 2, rank: [0, 1], gradient_accumulation_steps: 4 } });
    expect(ga).toMatch(/accumulates 4 micro-batches per process/);
    expect(ga).not.toMatch(/processes \(/);
  });

  it("OpenRLHF: dp_size from loss_batch_info when given, else num_processes; gas", () => {
    expect(updateScope({ trainer: 'openrlhf', config: {}, run: { num_processes: 4 } })).toMatch(/averages the gradients of 4 processes \(the batch holds one rank's micro-batch\)/);
    expect(updateScope({ trainer: 'openrlhf', config: {}, run: { loss_batch_info: { dp_size: 16, batch_num_tokens: 100, global_batch_size: 8 } } })).toMatch(/of 16 processes/);
    expect(updateScope({ trainer: 'openrlhf', config: {}, run: { gradient_accumulation_steps: 2 } })).toMatch(/^the trainer's optimizer step accumulates 2 micro-batches per process/);
  });

  it('verl: every rank and micro-batch of the mini-batch is in the dump', () => {
    expect(updateScope({ trainer: 'verl', config: {}, run: { data_parallel_size: 8, mini_batch_index: 0 } })).toBeNull();
  });
});
