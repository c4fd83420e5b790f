// One batch, one answer on an imported batch that was NOT stepped: once the user changes the settings its next
// update would run with (a form edit, another trainer, Defaults), the Doctor report the page shows is
// `grpo-studio doctor`'s on the page's Export (which records those settings: src/store/export_batch.ts), labelled as
// judged under the edited settings; back to the file's settings, the file's own report; settings that cannot be
// formed, that error and no report; an answer for older settings never replaces a newer one. The page's controller
// and store run over the real studio worker module in this thread (its import worker: the in-thread stand-in).
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { nodeGpu } from '../../src/gpu/node.ts';
import { parseArgs, readBatchFiles } from '../../src/cli/args.ts';
import { modelFlag } from '../../src/cli/doctor.ts';
import { diagnose, doctorOptions, type DoctorReport, type KnownModel } from '../../src/doctor/index.ts';
import { serializeBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { computeAdvantages } from '../../src/grpo/advantages.ts';
import type { Request, WorkerMessage } from '../../src/bridge/protocol.ts';
import { fakeWorker } from '../helpers/import_worker.ts';
import { memoryStorage } from '../helpers/page_store.ts';

vi.mock('../../src/gpu/browser.ts', () => ({ browserGpu: () => nodeGpu() }));

const MODEL = 'public/models/tiny-adder';
const REWARDS = [1, 0, 0.5, 0.25];
/** TRL's group advantages of REWARDS (G = 2), as a file with scale_rewards "group" holds them. */
const GROUP_ADV = Array.from(computeAdvantages(REWARDS, { num_generations: 2, scale_rewards: 'group' }).advantages!);

/** A TRL batch, left-padded prompts of two lengths; ids and pad / EOS of tiny-adder's tokenizer. */
const trlFile = (config: Record<string, unknown>, more: Partial<GrpoBatch> = {}) => ({
  format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 302, eos_token_ids: [304],
  prompt_ids: [[16, 10, 17], [16, 10, 17], [18, 19], [18, 19]], completion_ids: [[18, 304], [19, 20, 304], [22, 304], [23, 304]],
  completion_mask: [[1, 1], [1, 1, 1], [1, 1], [1, 1]], rewards: REWARDS, config: { beta: 0, ...config }, ...more,
});

/** A finding as the page and the CLI both name it. */
const said = (r: Pick<DoctorReport, 'findings' | 'skipped'>) => ({
  findings: r.findings.map((f) => `${f.rule}/${f.severity}/${f.sample ?? '-'}: ${f.message}`).sort(),
  skipped: r.skipped.map((k) => k.rule).sort(),
});
const rules = (r: Pick<DoctorReport, 'findings'>) => r.findings.map((f) => `${f.rule}/${f.severity}`);

/** Resolves once the page has handled every message delivered so far (the worker answers a macrotask later). */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * The page (controller + store) over the studio worker module. `hold(request)`: answers to such requests are kept
 * until released (release(i), in the order they were asked), so a test can deliver them late.
 */
async function openPage(hold: (r: Request) => boolean = () => false) {
  vi.resetModules();
  vi.stubGlobal('localStorage', memoryStorage());
  let port: { onmessage: ((ev: { data: unknown }) => void) | null } | null = null;
  const holding = new Set<number>();
  const held: { request: Request; deliver: () => void }[] = [];
  const asked = new Map<number, Request>();
  const posted: Request[] = [];
  const self = {
    onmessage: null as ((ev: { data: unknown }) => void) | null,
    postMessage: (msg: WorkerMessage) =>
      setTimeout(() => {
        const deliver = () => port?.onmessage?.({ data: msg });
        if ('id' in msg && 'ok' in msg && holding.has(msg.id)) held.push({ request: asked.get(msg.id)!, deliver });
        else deliver();
      }, 0),
  };
  vi.stubGlobal('self', self);
  vi.stubGlobal('Worker', class {
    onmessage: ((ev: { data: unknown }) => void) | null = null;
    onerror = null;
    private imports: ReturnType<typeof fakeWorker>['w'] | null = null;
    constructor(_url: unknown, opts: { name?: string }) {
      if (opts?.name === 'import') {
        this.imports = fakeWorker('run').w;
        this.imports.onmessage = (ev) => this.onmessage?.(ev);
      } else port = this;
    }
    postMessage(msg: { id: number; request: Request }) {
      if (this.imports) return this.imports.postMessage(msg as never);
      asked.set(msg.id, msg.request);
      posted.push(msg.request);
      if (hold(msg.request)) holding.add(msg.id);
      setTimeout(() => self.onmessage!({ data: msg }), 0);
    }
    terminate() {}
  });
  await import('../../src/worker/studio.worker.ts');
  const controller = await import('../../src/store/controller.ts');
  const { studioStore } = await import('../../src/store/index.ts');
  const { exportedBatch } = await import('../../src/store/export_batch.ts');
  const { judgedNote, judgedShown } = await import('../../src/store/derived.ts');
  const s = () => studioStore().getState();
  return {
    s, controller, posted, held,
    importFile: (obj: unknown) => controller.importBatchFiles([new File([JSON.stringify(obj)], 'a.json')]),
    exported: () => exportedBatch(s())!,
    note: () => judgedNote(judgedShown(s())),
    /** Waits for the report under the settings now: judged there (ready), or the file's own (none to judge). */
    settled: (status: 'ready' | 'own') => vi.waitFor(() => expect(status === 'own' ? s().judged : s().judged?.status).toBe(status === 'own' ? null : 'ready'), { timeout: 10_000 }),
    loadModel: async () => {
      const files = readdirSync(MODEL).map((f) => {
        const file = new File([readFileSync(join(MODEL, f))], f);
        Object.defineProperty(file, 'webkitRelativePath', { value: `tiny-adder/${f}` });
        return file;
      });
      await controller.loadModel({ kind: 'local', name: 'tiny-adder', files });
    },
  };
}

/** `grpo-studio doctor [--tokenizer DIR]` on the page's Export, written and read back as the CLI reads a file. */
function cliDoctor(exported: GrpoBatch, model?: KnownModel): DoctorReport {
  const path = join(mkdtempSync(join(tmpdir(), 'edited-export-')), 'a.grpo-batch.json');
  writeFileSync(path, serializeBatch(exported, { strictJson: true }));
  const read = readBatchFiles([path]);
  return diagnose(read.batch, doctorOptions(read.batch, model, read.inferred));
}

describe("an imported batch's settings edited, not stepped: the page's Doctor is the CLI's on its Export", () => {
  it('scale_rewards group → none on a TRL batch with advantages: advantage-mismatch on both, labelled; back to "group": the file\'s report', async () => {
    const page = await openPage();
    await page.importFile(trlFile({ scale_rewards: 'group' }, { advantages: GROUP_ADV }));
    const own = said(page.s().imported!.report);
    expect(rules(page.s())).not.toContain('advantage-mismatch/error');
    page.s().setSetting('batch', 'config', 'scale_rewards', 'none');
    await page.settled('ready');
    const cli = cliDoctor(page.exported());
    expect(rules(cli)).toContain('advantage-mismatch/error');
    expect(said(page.s())).toEqual(said(cli));
    expect(page.note()).toMatchObject({ status: 'ready' });
    expect(page.note()!.text).toContain('config.scale_rewards');
    // Reverted: the file's own report again, at once, which is the CLI's on the Export now.
    page.s().setSetting('batch', 'config', 'scale_rewards', undefined);
    expect(page.s().judged).toBeNull();
    expect(said(page.s())).toEqual(own);
    expect(said(page.s())).toEqual(said(cliDoctor(page.exported())));
    expect(page.note()).toBeNull();
  });

  it('position_ids from_attention_mask → arange on a GPT-2 batch: both warn of the shifted positions', async () => {
    const page = await openPage();
    await page.importFile(trlFile({ position_ids: 'from_attention_mask', model_type: 'gpt2' }));
    expect(rules(page.s())).not.toContain('position-ids-shift/warning');
    page.s().setSetting('batch', 'config', 'position_ids', 'arange');
    await page.settled('ready');
    const cli = cliDoctor(page.exported());
    expect(rules(cli)).toContain('position-ids-shift/warning');
    expect(said(page.s())).toEqual(said(cli));
  });

  it("a trainer switch (TRL → verl) judges the batch as verl's; Defaults brings the file's trainer and report back", async () => {
    const page = await openPage();
    // TRL's dapo over two processes without num_items_in_batch: an error under TRL, nothing a verl batch is judged by.
    await page.importFile(trlFile({ loss_type: 'dapo' }, { run: { num_processes: 2 } }));
    const own = said(page.s().imported!.report);
    expect(own.findings.some((f) => f.startsWith('num-items-in-batch/error'))).toBe(true);
    page.s().setTrainer('batch', 'verl');
    await page.settled('ready');
    const cli = cliDoctor(page.exported());
    expect(page.exported().trainer).toBe('verl');
    expect(rules(cli)).not.toContain('num-items-in-batch/error');
    expect(said(page.s())).toEqual(said(cli));
    expect(page.note()!.text).toContain('trainer: trl → verl');
    page.s().resetSettings();
    expect(page.s().judged).toBeNull();
    expect(said(page.s())).toEqual(own);
    expect(said(page.s())).toEqual(said(cliDoctor(page.exported())));
  });

  it('settings that cannot be formed show that error and no report (never the last one); fixed, the report follows', async () => {
    const page = await openPage();
    await page.importFile(trlFile({ scale_rewards: 'group' }, { advantages: GROUP_ADV }));
    page.s().setSetting('batch', 'config', 'scale_rewards', 'none');
    await page.settled('ready');
    expect(rules(page.s())).toContain('advantage-mismatch/error');
    page.s().setSetting('batch', 'config', 'beta', 'lots');
    expect(page.s().judged?.status).toBe('error');
    expect(page.s().findings).toEqual([]);
    expect(page.note()).toMatchObject({ status: 'error' });
    expect(page.note()!.text).toContain('config.beta');
    expect(() => page.exported()).toThrow();
    page.s().setSetting('batch', 'config', 'beta', 0.5);
    await page.settled('ready');
    expect(said(page.s())).toEqual(said(cliDoctor(page.exported())));
  });

  it('two quick edits: the answer for the first, arriving after the second, is dropped; the second is shown', async () => {
    const judging = (r: Request) => r.type === 'tokenizer-checks' && r.settings !== undefined;
    const page = await openPage(judging);
    await page.importFile(trlFile({ scale_rewards: 'group' }, { advantages: GROUP_ADV }));
    page.s().setSetting('batch', 'config', 'scale_rewards', 'none');
    // The first edit's request is in the worker; its answer is held back.
    await vi.waitFor(() => expect(page.held.length).toBe(1), { timeout: 10_000 });
    expect(page.held[0].request).toMatchObject({ settings: { config: { scale_rewards: 'none' } } });
    // The second edit: back to "group", and another β (still not the file's settings).
    page.s().setSetting('batch', 'config', 'scale_rewards', undefined);
    page.s().setSetting('batch', 'config', 'beta', 0.5);
    expect(page.s().judged?.status).toBe('busy');
    // The first answer lands now: it is for settings no longer the page's, and is not shown.
    page.held[0].deliver();
    await turn();
    await turn();
    expect(page.s().judged?.status).toBe('busy');
    expect(rules(page.s())).not.toContain('advantage-mismatch/error');
    // The second edit's request follows; its answer is the one shown.
    await vi.waitFor(() => expect(page.held.length).toBe(2), { timeout: 10_000 });
    expect(page.held[1].request).toMatchObject({ settings: { config: { beta: 0.5 } } });
    expect((page.held[1].request as { settings: { config: Record<string, unknown> } }).settings.config.scale_rewards).toBe('group');
    page.held[1].deliver();
    await page.settled('ready');
    const cli = cliDoctor(page.exported());
    expect(rules(cli)).not.toContain('advantage-mismatch/error');
    expect(said(page.s())).toEqual(said(cli));
    // One request per settled edit: the two quick ones did not each ask the worker (beyond the dropped first).
    expect(page.posted.filter(judging)).toHaveLength(2);
  });

  it("with a model loaded: judged with its tokenizer, as `grpo-studio doctor --tokenizer` on the Export", async () => {
    const page = await openPage();
    await page.loadModel();
    await page.importFile(trlFile({ scale_rewards: 'group' }, { advantages: GROUP_ADV }));
    page.s().setSetting('batch', 'config', 'scale_rewards', 'none');
    await page.settled('ready');
    const model = await modelFlag(parseArgs(['--tokenizer', MODEL], { values: ['tokenizer'] }));
    const cli = cliDoctor(page.exported(), model);
    expect(rules(cli)).toContain('advantage-mismatch/error');
    // The tokenizer's rules ran on both (the loaded model fits this batch).
    expect(cli.skipped.some((k) => k.rule === 'template-mismatch' || k.rule === 'retokenization-mismatch')).toBe(false);
    expect(said(page.s())).toEqual(said(cli));
  });
});
