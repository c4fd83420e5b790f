// Loading another model while an imported batch is on screen checks the batch again with it (src/store/controller.ts
// loadModel against a scripted worker): the findings and decoded tokens on screen are the new model's, as
// `grpo-studio doctor --tokenizer` with that model's folder gives, never the findings of the model the import found.
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { DoctorReport, Finding } from '../../src/doctor/types.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { pageWithWorker } from '../helpers/page_store.ts';

const requests: { type: string; import?: number }[] = [];
const FOUND: Finding = { rule: 'token-out-of-vocabulary', severity: 'error', message: 'from the new model', sample: 0 } as Finding;
const report = (findings: Finding[]) => ({ findings, skipped: [], counts: { error: findings.length, warning: 0, info: 0 } }) as unknown as DoctorReport;

class ScriptedWorker {
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onerror: unknown = null;
  postMessage(msg: { id: number; request: { type: string; import?: number } }): void {
    requests.push(msg.request);
    const result =
      msg.request.type === 'load-model' ? { model: { name: 'other', model_type: 'qwen3', vocab_size: 10 } }
      : msg.request.type === 'tokenizer-checks' ? { report: report([FOUND]), token_texts: { by_id: { 5: 'five' } } }
      : {};
    setTimeout(() => this.onmessage?.({ data: { id: msg.id, ok: true, result } }));
  }
}

let controller: Awaited<ReturnType<typeof pageWithWorker>>['controller'];
let store: Awaited<ReturnType<typeof pageWithWorker>>['store'];

beforeAll(async () => {
  ({ controller, store } = await pageWithWorker(ScriptedWorker));
});

describe('another model loaded over an imported batch', () => {
  it("asks the worker for the batch's full check with it, and shows that report and its token texts", async () => {
    const batch = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [2], prompt_ids: [[5]], completion_ids: [[6, 2]], completion_mask: [[1, 1]] } as GrpoBatch;
    store().setImported({ batch, name: 'b.json', importId: 7, report: report([]) });
    expect(store().findings).toEqual([]);
    await controller.loadModel({ kind: 'hub', id: 'x/other' });
    await vi.waitFor(() => expect(store().findings).toEqual([FOUND]));
    expect(requests.filter((r) => r.type === 'tokenizer-checks')).toEqual([{ type: 'tokenizer-checks', import: 7 }]);
    expect(store().tokenTexts).toEqual({ by_id: { 5: 'five' } });
    expect(store().imported?.report.findings).toEqual([FOUND]);
  });
});
