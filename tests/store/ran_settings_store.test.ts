// The settings an update ran with stay its own after it ran (src/store/controller.ts against a scripted worker):
// a what-if is resolved over them, not over the form edited since ("back to current" is the update, a what-if's Δ
// is its own values), and Apply makes the next update's settings exactly the what-if's; the report's Settings
// table is the update's config (an imported batch's update sampled nothing, and a prompt-set update's sampling
// never overwrites a config key); an update from an imported batch sends the reader's inferred ids with it; the
// prompt set's preset is its task's (multiply-tool's completion budget, not addition's).
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readBatchFiles } from '../../src/cli/args.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import type { EffectiveSettings } from '../../src/grpo/settings/effective.ts';
import { settingOf, settingsChanges, trainerOfBatch } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { DEFAULT_GRPO_CONFIG } from '../../src/grpo/default_task.ts';
import { TOOL_GRPO_CONFIG } from '../../src/grpo/tool_task.ts';
import { TASK_IDS } from '../../src/grpo/tasks.ts';
import { taskLayer } from '../../src/bridge/settings.ts';
import type { DoctorReport } from '../../src/doctor/types.ts';
import { pageWithWorker } from '../helpers/page_store.ts';

/** Every request the page sent, in order; run-stage and what-if answered with an empty result. */
const requests: { type: string; settings?: unknown; start?: unknown }[] = [];

class ScriptedWorker {
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onerror: unknown = null;
  postMessage(msg: { id: number; request: { type: string; stage?: string } }): void {
    requests.push(msg.request);
    const result = msg.request.type === 'run-stage' ? { id: msg.request.stage, ms: 1, gpuBytes: 0, peakBytes: 0, data: null } : {};
    setTimeout(() => this.onmessage?.({ data: { id: msg.id, ok: true, result } }));
  }
}

let controller: Awaited<ReturnType<typeof pageWithWorker>>['controller'];
let derived: typeof import('../../src/store/derived.ts');
let store: Awaited<ReturnType<typeof pageWithWorker>>['store'];

beforeAll(async () => {
  ({ controller, store } = await pageWithWorker(ScriptedWorker));
  derived = await import('../../src/store/derived.ts');
});

afterEach(() => {
  store().resetRun();
  store().resetSettings();
  store().setStepFrom('prompts');
  requests.length = 0;
});

const NO_FINDINGS: DoctorReport = { findings: [], skipped: [], counts: { error: 0, warning: 0, info: 0 } } as unknown as DoctorReport;

/** Imports a batch file as the page does after the worker's answer: its trainer, no edits, shown and stepped from. */
function importFile(path: string, patch: Partial<GrpoBatch> = {}, inferred?: { pad_token_id?: string; eos_token_ids?: string }): GrpoBatch {
  const batch = { ...readBatchFiles([path]).batch, ...patch };
  store().startFromBatch(trainerOfBatch(batch));
  store().setImported({ batch, name: 'b.json', report: NO_FINDINGS, inferred });
  return batch;
}

/** Runs the render stage through the scripted worker: the update starts with the settings of that moment. */
async function startUpdate(): Promise<EffectiveSettings> {
  expect(await controller.nextStage()).toBe(true);
  return store().runSettings!.settings;
}

const whatIfSent = () => requests.filter((r) => r.type === 'what-if').at(-1)!.settings as EffectiveSettings;

describe('a what-if on the update as it ran', () => {
  it('is resolved over the settings the update ran with, not the form edited since; Apply gives exactly its settings', async () => {
    importFile('tests/fixtures/batches/clean.json', { config: { temperature: 0.7, beta: 0.1 } });
    const ran = await startUpdate();
    expect(settingOf(ran, 'config', 'beta').value).toBe(0.1);
    // After the run the user edits β in the settings form: the results on screen read as stale.
    store().setSetting('batch', 'config', 'beta', 0.5);

    // "Back to current": the update itself, nothing of the later edit.
    await controller.runWhatIf({}, ran.trainer);
    expect(settingsChanges(ran, whatIfSent())).toEqual([]);
    // A what-if's Δ is its own value only.
    await controller.runWhatIf({ loss_type: 'grpo' });
    expect(settingsChanges(ran, whatIfSent()).map((l) => l.split(':')[0])).toEqual(['config.loss_type']);
    expect(settingOf(whatIfSent(), 'config', 'loss_type')).toEqual({ value: 'grpo', provenance: { origin: 'edited', label: 'what-if' } });

    // Apply: the next update's settings are the what-if's, the later β edit replaced by the β the what-if ran with.
    controller.applyWhatIf();
    const next = derived.effectiveOf(store());
    if ('error' in next) throw new Error(next.error);
    expect(settingsChanges(whatIfSent(), next.settings)).toEqual([]);
    expect(settingOf(next.settings, 'config', 'beta').value).toBe(0.1);
  });

  it('under another trainer: the file and the values the update ran with that mean the same there, over its defaults', async () => {
    importFile('tests/fixtures/batches/clean.json', { config: { beta: 0.1 } });
    store().setSetting('batch', 'config', 'scale_rewards', 'batch');
    const ran = await startUpdate();
    expect(ran.trainer).toBe('trl');
    // After the run the user tries verl in the settings form, edits it there, and goes back to TRL.
    store().setTrainer('batch', 'verl');
    store().setSetting('batch', 'config', 'scale_rewards', 'none');
    store().setTrainer('batch', 'trl');
    await controller.runWhatIf({}, 'verl');
    const verl = whatIfSent();
    expect(verl.trainer).toBe('verl');
    // scale_rewards means the same under verl (the studio's advantages): the update's, not the form's later 'none'.
    expect(settingOf(verl, 'config', 'scale_rewards')).toEqual({ value: 'batch', provenance: { origin: 'edited' } });
    // TRL's β is not a verl row: verl's own rows keep their defaults.
    expect(settingOf(verl, 'config', 'beta')).toEqual({ value: null, provenance: { origin: 'default' } });
    // What the what-if panel shows is what was sent.
    const shown = derived.whatIfOf(store(), 'verl', {});
    expect(shown && 'settings' in shown && settingsChanges(shown.settings, verl)).toEqual([]);
  });
});

describe("the report's Settings table", () => {
  it("is an imported batch's update's config: the prompt set's sampling does not enter it", async () => {
    const batch = importFile('tests/fixtures/batches/clean.json', { config: { temperature: 0.7, beta: 0.1 } });
    store().setSampling({ temperature: 1.3 });
    await startUpdate();
    const table = derived.reportSettings(store())!;
    expect(table.temperature).toBe(0.7);
    expect(table.beta).toBe(0.1);
    // The batch's group size is its own (2), and the prompt set's sampling keys are absent.
    expect(batch.num_generations).toBe(2);
    expect(Object.keys(table).filter((k) => /num_generations|max_new_tokens|seed|sampling/.test(k))).toEqual([]);
  });

  it("is a prompt-set update's config with its sampling beside it, never over a config key", async () => {
    // The temperature is one value (TRL samples and scores with it); the sampler's presence penalty is its own (no
    // row of TRL's: vLLM's, through generation_kwargs).
    store().setSampling({ temperature: 1.3, presence_penalty: 0.3 });
    const ran = await startUpdate();
    expect(settingOf(ran, 'config', 'temperature')).toEqual({ value: 1.3, provenance: { origin: 'edited', label: 'sampling form' } });
    const table = derived.reportSettings(store())!;
    expect(table.temperature).toBe(1.3);
    expect(table['sampling.temperature']).toBe(1.3);
    expect(table['sampling.presence_penalty']).toBe(0.3);
    expect(table.presence_penalty).toBeUndefined();
    expect(table['sampling.max_new_tokens']).toBe(store().sampling.max_new_tokens);
    expect(table.max_completion_length).toBe(store().sampling.max_new_tokens);
  });
});

describe('an update from an imported batch', () => {
  it("carries the ids the batch's reader inferred to the worker, with the batch", async () => {
    const inferred = { pad_token_id: 'the first padding id seen (NeMo RL writes none)' };
    const batch = importFile('tests/fixtures/batches/clean.json', {}, inferred);
    await startUpdate();
    const start = requests.find((r) => r.type === 'run-stage')!.start;
    expect(start).toEqual({ kind: 'batch', batch, inferred });
  });
});

describe("the prompt set's preset", () => {
  it("is its task's: multiply-tool's completion budget sets the loss's max_completion_length", () => {
    const before = derived.effectiveOf(store());
    if ('error' in before) throw new Error(before.error);
    expect(settingOf(before.settings, 'config', 'max_completion_length').value).toBe(DEFAULT_GRPO_CONFIG.max_completion_length);
    store().chooseTask('multiply-tool');
    const after = derived.effectiveOf(store());
    if ('error' in after) throw new Error(after.error);
    expect(settingOf(after.settings, 'config', 'max_completion_length')).toEqual({ value: TOOL_GRPO_CONFIG.max_completion_length, provenance: { origin: 'preset', label: 'multiply-tool task' } });
    expect(stepConfigOf(after.settings, store().sampling.max_new_tokens).loss.max_completion_length).toBe(TOOL_GRPO_CONFIG.max_completion_length);
    expect(store().sampling.max_new_tokens).toBe(TOOL_GRPO_CONFIG.max_completion_length);
  });

  it("is each task's GRPO config (its tool loop's iterations are the tools form's, not a loss setting)", () => {
    const configs = { addition: DEFAULT_GRPO_CONFIG, 'multiply-tool': TOOL_GRPO_CONFIG } as Record<string, Record<string, unknown>>;
    for (const id of TASK_IDS) {
      const { max_tool_calling_iterations: _, ...loss } = configs[id];
      expect(taskLayer(id).config, id).toEqual(loss);
    }
  });
});
