// Export file names (issue 24): the page's own update was saved as "current step.grpo-batch.json".
import { describe, expect, it } from 'vitest';
import { exportBase } from '../../src/store/export_name.ts';

describe('exportBase', () => {
  const base = { importedName: null, modelName: 'HuggingFaceTB/SmolLM2-135M', policySteps: 0, stepDone: false };
  it('names an imported batch after its file', () => {
    expect(exportBase({ ...base, batchName: 'trl dump (rank 0).json', batchOrigin: 'import' })).toBe('trl-dump-rank-0');
  });
  it("names the page's own update after the model and the update's number, before and after its step", () => {
    expect(exportBase({ ...base, batchName: 'current step', batchOrigin: 'step' })).toBe('SmolLM2-135M.update-1');
    expect(exportBase({ ...base, batchName: 'current step', batchOrigin: 'step', policySteps: 1, stepDone: true })).toBe('SmolLM2-135M.update-1');
    expect(exportBase({ ...base, batchName: 'current step', batchOrigin: 'step', policySteps: 1 })).toBe('SmolLM2-135M.update-2');
  });
  it('names a stepped import after the imported file', () => {
    expect(exportBase({ ...base, batchName: 'b.json (stepped)', batchOrigin: 'step', importedName: 'b.json', policySteps: 3, stepDone: true })).toBe('b.stepped.update-3');
  });
  it('never yields an empty name', () => {
    expect(exportBase({ ...base, batchName: '', batchOrigin: null })).toBe('batch');
  });
});
