// The studio store (src/store): only the settings slices reach local storage and come back after a
// "reload" (a new store on the same storage); stage results are kept by stage and move the cursor; an
// assembled batch replaces the view until reset, an imported one stays (and comes back when the update
// starts from it); an imported batch's settings are its own config over the trainer's defaults (never an
// earlier batch's or form's), and a step from the prompt set does not use them; the group statistics the page
// shows come from the worker (the advantages stage, else the Doctor's report on import), never recomputed.
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { doneStageTimes, effectiveOf, groupStats } from '../../src/store/derived.ts';
import { shallow } from 'zustand/shallow';
import { STORAGE_KEY, createStudioStore } from '../../src/store/index.ts';
import { DEFAULT_PROMPTS, DEFAULT_SAMPLING_SETTINGS } from '../../src/store/settings.ts';
import { TASKS } from '../../src/grpo/tasks.ts';
import { STAGES, type StageResult } from '../../src/bridge/protocol.ts';
import { settingOf, trainerOfBatch, type EffectiveSettings } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { DEFAULT_GRPO_CONFIG } from '../../src/grpo/default_task.ts';
import { memoryStorage } from '../helpers/page_store.ts';

const batch: GrpoBatch = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [1], prompt_ids: [[5]], completion_ids: [[1]], completion_mask: [[1]] };
const report = { findings: [{ rule: 'x', severity: 'error' as const, message: 'm', hint: 'h' }], skipped: [], counts: { error: 1, warning: 0, info: 0 } };
const mem = { gpuBytes: 1, peakBytes: 2 };
const imported = { batch, name: 'b.json', report };

describe('persistence', () => {
  it('stores the settings slices and the panel layout only and restores them in a new store', () => {
    const storage = memoryStorage();
    const a = createStudioStore(storage);
    a.getState().setPrompt(0, { user: 'What is 2 + 2?', answer: '4' });
    a.getState().setSampling({ num_generations: 3, top_p: 0.9 });
    a.getState().setSetting('prompts', 'config', 'beta', 0);
    a.getState().setSetting('prompts', 'config', 'loss_type', 'dr_grpo');
    a.getState().addReward('js');
    a.getState().setImported(imported);
    a.getState().pushError({ kind: 'bad-file', message: 'nope' });

    const saved = JSON.parse(storage.data.get(STORAGE_KEY)!);
    // The settings slices and the side panels' layout (src/store/layout.ts); nothing of the session.
    expect(Object.keys(saved.state).sort()).toEqual(['edits', 'panels', 'prompts', 'rewards', 'sampling', 'task', 'tools', 'trainer']);

    const b = createStudioStore(storage).getState();
    expect(b.prompts[0]).toEqual({ system: '', user: 'What is 2 + 2?', answer: '4' });
    expect(b.sampling.num_generations).toBe(3);
    expect(b.sampling.top_p).toBe(0.9);
    expect(b.edits.trl.config).toEqual({ beta: 0, loss_type: 'dr_grpo' });
    expect(b.rewards.at(-1)?.kind).toBe('js');
    expect(b.batch).toBeNull();
    expect(b.errors).toEqual([]);
  });

  it('a task choice replaces the prompt set, sampling, rewards and tools, keeps the loss edits, and is restored', () => {
    const storage = memoryStorage();
    const a = createStudioStore(storage);
    a.getState().setSetting('prompts', 'config', 'beta', 0);
    expect(a.getState()).toMatchObject({ task: 'addition', tools: null });
    a.getState().chooseTask('multiply-tool');
    const s = a.getState();
    expect(s.task).toBe('multiply-tool');
    expect(s.prompts.map((p) => p.user)).toEqual(TASKS['multiply-tool'].prompts.map((p) => p.messages[0].content));
    expect(s.sampling.max_new_tokens).toBe(TASKS['multiply-tool'].max_completion_length);
    expect(s.rewards.map((r) => r.name)).toEqual(TASKS['multiply-tool'].rewards.map((r) => r.name));
    expect(s.tools).toMatchObject({ way: 'concat', max_tool_calling_iterations: TASKS['multiply-tool'].tools.max_tool_calling_iterations, source: TASKS['multiply-tool'].tools.source });
    expect(s.edits.trl.config).toEqual({ beta: 0 });
    a.getState().setTools({ way: 'rerender' });
    const b = createStudioStore(storage).getState();
    expect(b.task).toBe('multiply-tool');
    expect(b.tools?.way).toBe('rerender');
    // A stored task this version does not ship: the default task, with its own (no) tools.
    storage.data.set(STORAGE_KEY, JSON.stringify({ state: { ...JSON.parse(storage.data.get(STORAGE_KEY)!).state, task: 'gone' }, version: 2 }));
    expect(createStudioStore(storage).getState()).toMatchObject({ task: 'addition', tools: null });
  });

  it('keeps current defaults for keys an older stored shape lacks', () => {
    const storage = memoryStorage();
    // An older shape (version 1: a full loss form, a preset object) is no edits: dropped, not reinterpreted.
    storage.setItem(STORAGE_KEY, JSON.stringify({ state: { loss: { beta: 0.5 }, trainer: { trainer: 'verl', config: {}, run: {} }, prompts: 'garbage', sampling: { top_p: 0.5 } }, version: 1 }));
    const s = createStudioStore(storage).getState();
    // The user's sampling from the older version survives it.
    expect(s.trainer).toBe('trl');
    expect(s.edits.trl).toEqual({ config: {}, run: {} });
    expect('loss' in s).toBe(false);
    expect(s.prompts).toEqual(DEFAULT_PROMPTS);
    expect(s.sampling.top_p).toBe(0.5);
    expect(s.sampling.num_generations).toBe(DEFAULT_SAMPLING_SETTINGS.num_generations);
    const kept = memoryStorage();
    kept.setItem(STORAGE_KEY, JSON.stringify({ state: { prompts: [{ system: '', user: 'u', answer: 'a' }] }, version: 1 }));
    expect(createStudioStore(kept).getState().prompts).toEqual([{ system: '', user: 'u', answer: 'a' }]);
  });

  it('resetSettings restores the defaults', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().removePrompt(0);
    s.getState().resetSettings();
    expect(s.getState().prompts).toEqual(DEFAULT_PROMPTS);
  });
});

describe('stepper state', () => {
  it('merges stage results in order and advances the cursor', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setImported(imported);
    expect(s.getState().findings).toHaveLength(1);
    s.getState().stageStarted('render');
    expect(s.getState().stages.render.status).toBe('running');
    const render: StageResult<'render'> = { id: 'render', ms: 3, ...mem, data: { prompt_texts: ['p'], messages: [[{ role: 'user', content: 'p' }]], prompt_ids: [[5]] } };
    s.getState().stageDone(render);
    expect(s.getState().cursor).toBe(1);
    expect(s.getState().stages.render).toMatchObject({ status: 'done', ms: 3, gpuBytes: 1, peakBytes: 2 });
    expect(s.getState().run.render?.prompt_texts).toEqual(['p']);
    s.getState().stageDone({ id: 'sample', ms: 0, ...mem, skipped: 'why', data: null });
    expect(s.getState().stages.sample).toMatchObject({ status: 'skipped', skipped: 'why' });
    expect(s.getState().run.sample).toBeUndefined();

    const stepBatch = { ...batch, completion_ids: [[7, 1]], completion_mask: [[1, 1]] };
    const assemble = {
      id: 'assemble', ms: 1, ...mem,
      data: { batch: stepBatch, padded: { B: 1, C: 2 }, token_texts: { by_id: { 5: 'a', 7: 'b', 1: 'c' } }, report: { ...report, findings: [] } },
    } as unknown as StageResult<'assemble'>;
    s.getState().stageDone(assemble);
    expect(s.getState().cursor).toBe(STAGES.indexOf('assemble') + 1);
    expect(s.getState().batch).toBe(stepBatch);
    expect(s.getState().batchOrigin).toBe('step');
    expect(s.getState().findings).toEqual([]);
    expect(s.getState().run.render?.prompt_texts).toEqual(['p']); // earlier stages kept

    // The update started from the imported batch: reset shows it again.
    s.getState().resetRun();
    expect(s.getState().cursor).toBe(0);
    expect(s.getState().run).toEqual({});
    expect(s.getState().batch).toBe(batch);
    expect(s.getState().findings).toHaveLength(1);

    // From the prompt set, a step's batch goes with its run; the imported one is kept for later.
    s.getState().setStepFrom('prompts');
    expect(s.getState().batch).toBeNull();
    s.getState().stageDone(assemble);
    s.getState().resetRun();
    expect(s.getState().batch).toBeNull();
    s.getState().setStepFrom('import');
    expect(s.getState().batch).toBe(batch);
  });

  it("the timings chart's selection changes when a stage is done, not when one starts", () => {
    const s = createStudioStore(memoryStorage());
    const before = doneStageTimes(s.getState());
    expect(before).toEqual(STAGES.map(() => null));
    s.getState().stageStarted('render');
    expect(shallow(doneStageTimes(s.getState()), before)).toBe(true);
    s.getState().stageDone({ id: 'render', ms: 3, ...mem, data: null });
    const done = doneStageTimes(s.getState());
    expect(shallow(done, before)).toBe(false);
    expect(done[STAGES.indexOf('render')]).toBe(3);
    // A skipped stage draws no bar: its selection stays as it was.
    s.getState().stageStarted('sample');
    s.getState().stageDone({ id: 'sample', ms: 0, ...mem, skipped: 'why', data: null });
    expect(shallow(doneStageTimes(s.getState()), done)).toBe(true);
  });

  it('shows group statistics from the advantages stage, else from the import report', () => {
    const s = createStudioStore(memoryStorage());
    expect(groupStats(s.getState())).toBeNull(); // nothing on screen
    const fromImport = [{ group: 0, mean: 0.5, std: 0.7, zero_std: false }];
    s.getState().setImported({ ...imported, report: { ...report, groups: fromImport } });
    expect(groupStats(s.getState())).toBe(fromImport);
    const fromStage = [{ group: 0, mean: 1, std: 0, zero_std: true }];
    const adv = (groups: typeof fromStage | null): StageResult<'advantages'> => ({ id: 'advantages', ms: 0, ...mem, data: { advantages: [0], groups, from: groups ? 'rewards' : 'batch' } });
    s.getState().stageDone(adv(fromStage));
    expect(groupStats(s.getState())).toBe(fromStage);
    // The batch's own advantages (no groups computed): the stepped import keeps the report's statistics.
    s.getState().resetRun();
    s.getState().stageDone(adv(null));
    expect(groupStats(s.getState())).toBe(fromImport);
    // A step from the prompt set never shows the imported batch's statistics.
    s.getState().setStepFrom('prompts');
    s.getState().stageDone(adv(null));
    expect(groupStats(s.getState())).toBeNull();
  });

  it("an imported batch's TRL config is its update's settings, over TRL's defaults, never an earlier batch's", () => {
    const s = createStudioStore(memoryStorage());
    const settings = (): EffectiveSettings => {
      const e = effectiveOf(s.getState());
      if (!('settings' in e)) throw new Error(e.error);
      return e.settings;
    };
    const cfg = { loss_type: 'dr_grpo', beta: 0.1, epsilon: 0.3, scale_rewards: false, optimizer: { name: 'sgd', lr: 0.5, betas: [0.8, 0.9] }, max_grad_norm: 0, foo: 1 };
    const a = { ...batch, config: cfg };
    s.getState().setSetting('prompts', 'config', 'epsilon_high', 0.5); // an edit before the import is not carried into it
    s.getState().startFromBatch(trainerOfBatch(a));
    s.getState().setImported({ ...imported, batch: a, name: 'a.json' });
    const step = stepConfigOf(settings(), 4);
    // TRL: epsilon_high defaults to epsilon; scale_rewards false means "none"; max_grad_norm 0: no clipping.
    expect(step.loss).toMatchObject({ loss_type: 'dr_grpo', beta: 0.1, epsilon_low: 0.3, epsilon_high: 0.3 });
    expect(step.scale_rewards).toBe('none');
    expect(step.optimizer).toMatchObject({ name: 'sgd', lr: 0.5, betas: [0.8, 0.9] });
    expect(step.max_grad_norm).toBe(0);
    expect(settingOf(settings(), 'config', 'beta').provenance).toEqual({ origin: 'file', label: 'a.json' });

    // A second batch with a sparse config: TRL's defaults for what it does not set, nothing from a.json.
    const b = { ...batch, config: { beta: 0.2 } };
    s.getState().startFromBatch(trainerOfBatch(b));
    s.getState().setImported({ ...imported, batch: b, name: 'b.json' });
    const second = settings();
    expect(settingOf(second, 'config', 'beta')).toEqual({ value: 0.2, provenance: { origin: 'file', label: 'b.json' } });
    for (const name of ['loss_type', 'epsilon', 'epsilon_high', 'scale_rewards', 'optimizer', 'max_grad_norm']) expect(settingOf(second, 'config', name).provenance).toEqual({ origin: 'default' });
    expect(stepConfigOf(second, 4).optimizer.name).toBe('adamw');

    // A file value the table refuses: the settings cannot be formed, and the error names the file and the field.
    s.getState().setImported({ ...imported, batch: { ...batch, config: { loss_type: 'not-a-loss' } }, name: 'c.json' });
    const bad = effectiveOf(s.getState());
    expect('error' in bad && bad.error).toMatch(/^c\.json: .*loss_type/);

    // A step from the prompt set runs with the default task's preset, not the file's values.
    s.getState().setStepFrom('prompts');
    expect(settingOf(settings(), 'config', 'beta')).toEqual({ value: DEFAULT_GRPO_CONFIG.beta, provenance: { origin: 'preset', label: 'addition task' } });
  });

  it('keeps an imported batch on reset and marks a failed stage', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setImported(imported);
    s.getState().setRunning(true);
    s.getState().stageFailed('render');
    expect(s.getState().stages.render.status).toBe('error');
    expect(s.getState().running).toBe(false);
    s.getState().resetRun();
    expect(s.getState().batch).toBe(batch);
    expect(s.getState().stages.render.status).toBe('pending');
  });

  it("takes an import's deferred full report only while that batch is the imported one", () => {
    const s = createStudioStore(memoryStorage());
    s.getState().setImported({ ...imported, report: { ...report, skipped: [{ rule: 'retokenization-mismatch', reason: 'running after the import' }] } });
    const full = { findings: [], skipped: [], counts: { error: 0, warning: 0, info: 0 } };
    s.getState().setImportedReport(batch, full);
    expect(s.getState().skipped).toEqual([]);
    expect(s.getState().findings).toEqual([]);
    expect(s.getState().imported!.report).toBe(full);
    // A newer import: a late report on the old batch changes nothing.
    const other = { ...batch, prompt_ids: [[6]] };
    s.getState().setImported({ ...imported, batch: other });
    s.getState().setImportedReport(batch, full);
    expect(s.getState().findings).toEqual(report.findings);
    expect(s.getState().imported!.report).toBe(report);
  });

  it('shows each distinct error once', () => {
    const s = createStudioStore(memoryStorage());
    s.getState().pushError({ kind: 'out-of-memory', message: 'logits do not fit' });
    s.getState().pushError({ kind: 'out-of-memory', message: 'logits do not fit' });
    s.getState().pushError({ kind: 'device-lost', message: 'lost' });
    expect(s.getState().errors.map((e) => e.kind)).toEqual(['out-of-memory', 'device-lost']);
    s.getState().dismissError(s.getState().errors[0].id);
    expect(s.getState().errors.map((e) => e.kind)).toEqual(['device-lost']);
  });
});
