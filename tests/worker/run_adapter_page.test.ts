// The page's update on an imported batch whose run trained a LoRA adapter (OpenRLHF ds.lora.rank > 0): refused
// before any stage with the message `grpo-studio step` gives on the same file (src/grpo/run_adapter.ts, one
// decision for both), never a full-weight update of a run that updated an adapter only.
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { createStudioStore } from '../../src/store/index.ts';
import { effectiveOf } from '../../src/store/derived.ts';
import type { StepSettings } from '../../src/bridge/protocol.ts';
import { memoryStorage } from '../helpers/page_store.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';
import { testGpu } from '../helpers/gpu.ts';

const file: GrpoBatch = {
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1], trainer: 'openrlhf',
  prompt_ids: [[5, 6, 7], [5, 6, 7]], completion_ids: [[10, 11, 1], [12, 1]], completion_mask: [[1, 1, 1], [1, 1]], rewards: [1, 0],
  config: { 'algo.advantage.estimator': 'group_norm', 'ds.lora.rank': 8, 'ds.lora.alpha': 16 },
};

describe('a LoRA run stepped on the page without its adapter', () => {
  it("is refused before any stage, as the CLI's step refuses it", async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    const st = createStudioStore(memoryStorage());
    st.getState().startFromBatch('openrlhf');
    st.getState().setImported({ batch: file, name: 'a.json', report: runner.inspect(file).report });
    const e = effectiveOf(st.getState());
    if ('error' in e) throw new Error(e.error);
    const { prompts, sampling, rewards, tools } = st.getState();
    const settings: StepSettings = structuredClone({ prompts, sampling, rewards, tools, settings: e.settings });
    // The CLI's words for the same file (tests/cli/step_openrlhf_runs.test.ts): one function decides both.
    await expect(runner.runStage('render', settings, { kind: 'batch', batch: file })).rejects.toThrow(/^config\.ds\.lora\.rank: 8: the run trained a LoRA adapter on a frozen base \(ds\.lora\.rank = 8, ds\.lora\.alpha = 16\), not every parameter/);
    runner.dispose();
  });
});
