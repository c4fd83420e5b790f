// The import worker (src/worker/import_job.ts) driven through a fake worker in Node: a file is read,
// parsed and checked by the Doctor with progress on the way, a bad file becomes a one-line 'bad-file' failure, a
// worker that dies is an internal failure naming the file, and a cancel terminates the worker and
// rejects with Cancelled (what a hung or 10-second parse of a huge file needs).
import { describe, expect, it } from 'vitest';
import { parseInWorker } from '../../src/worker/import_job.ts';
import { Cancelled, StudioFailure } from '../../src/bridge/errors.ts';
import { diagnose } from '../../src/doctor/index.ts';
import type { LoadProgress } from '../../src/bridge/protocol.ts';
import { fakeWorker } from '../helpers/import_worker.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readBatchFiles } from '../../src/cli/args.ts';
import { doctorOptions } from '../../src/doctor/index.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';

const file = (o: object) => new Blob([JSON.stringify(o)]);
const good = { format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2], prompt_ids: [[5], [5]], completion_ids: [[7, 2], [8]], completion_mask: [[1, 1], [1]] };

describe('import worker', () => {
  it('reads the file, parses it, runs the Doctor and reports progress', async () => {
    const { w, state } = fakeWorker('run');
    const labels: string[] = [];
    const job = { file: file(good), name: 'b.json', doctor: true };
    const { done } = parseInWorker(job, (p) => labels.push(p.label), () => w);
    const { read, report } = await done;
    expect(read.batch.completion_ids).toEqual([[7, 2], [8]]);
    expect(report).toEqual(diagnose(read.batch));
    expect(labels).toEqual(['parsing b.json', 'Doctor checks']);
    expect(state.terminated).toBe(true);
  });

  it('leaves the Doctor to the caller when asked (the model tokenizer checks there)', async () => {
    const { w } = fakeWorker('run');
    const { done } = parseInWorker({ file: file(good), name: 'b.json', doctor: false }, () => {}, () => w);
    expect((await done).report).toBeNull();
  });

  it('a bad file is a one-line bad-file failure', async () => {
    const { w } = fakeWorker('run');
    const err = await parseInWorker({ file: new Blob(['{"format": "grpo-batch/v1", ']), name: 'x.json', doctor: true }, () => {}, () => w).done.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StudioFailure);
    expect((err as StudioFailure).kind).toBe('bad-file');
    expect((err as StudioFailure).message).not.toContain('\n');
  });

  it('a dying worker is an internal failure naming the file', async () => {
    const { w } = fakeWorker('die');
    await expect(parseInWorker({ file: file(good), name: 'huge.json', doctor: true }, () => {}, () => w).done).rejects.toThrow(/import worker stopped: Out of memory \(huge\.json/);
  });

  it('a cancel terminates a worker that never answers and rejects with Cancelled', async () => {
    const { w, state } = fakeWorker('hang');
    const run = parseInWorker({ file: file(good), name: 'slow.json', doctor: true }, () => {}, () => w);
    run.cancel();
    await expect(run.done).rejects.toBeInstanceOf(Cancelled);
    expect(state.terminated).toBe(true);
  });
});

describe('reading a big file in the import worker', () => {
  it('reports read progress in steps and reads every byte', async () => {
    const { w } = fakeWorker('run');
    const pad = ' '.repeat(9 << 20); // JSON allows whitespace: 9 MiB of it before the batch
    const seen: LoadProgress[] = [];
    const file = new Blob([pad, JSON.stringify(good)]);
    const { read } = await parseInWorker({ file, name: 'big.json', doctor: false }, (p) => seen.push(p), () => w).done;
    expect(read.batch.completion_ids).toEqual([[7, 2], [8]]);
    const reads = seen.filter((p) => p.label === 'reading big.json');
    expect(reads.length).toBeGreaterThanOrEqual(1);
    for (const [i, p] of reads.entries()) {
      expect(p.total).toBe(file.size);
      expect(p.loaded).toBeLessThanOrEqual(file.size);
      expect(p.loaded).toBeGreaterThan(i > 0 ? reads[i - 1].loaded : 0);
    }
    expect(seen[seen.length - 1].label).toBe('parsing big.json');
  });
});

describe('several files in one import (dropped or selected together)', () => {
  const formats = path.resolve(import.meta.dirname, '..', 'fixtures', 'formats');
  const [r0, r1] = ['trl-rank0.safetensors', 'trl-rank1.safetensors'].map((n) => path.join(formats, n));
  const blob = (p: string) => new Blob([readFileSync(p)]);

  it("two TRL rank files give exactly the CLI's merge (readBatchFiles): batch, notes, keys and the Doctor's report", async () => {
    const { w } = fakeWorker('run');
    const labels: string[] = [];
    // Given out of rank order, as a drop may list them: both sides sort by rank.
    const { read, report } = await parseInWorker({ file: blob(r1), name: r1, also: [{ file: blob(r0), name: r0 }], doctor: true }, (p) => labels.push(p.label), () => w).done;
    const cli = readBatchFiles([r1, r0]);
    expect(read).toEqual(cli);
    expect(read.batch.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    expect(report).toEqual(diagnose(cli.batch, doctorOptions(cli.batch)));
    expect(labels).toEqual([`parsing ${r1}`, `parsing ${r0}`, 'Doctor checks']);
  });

  it("files that disagree are the CLI's one-line refusal, as a bad-file failure", async () => {
    const bytes = editSafetensors(new Uint8Array(readFileSync(r1)), { num_processes: '3', rewards: undefined });
    const err = await parseInWorker({ file: blob(r0), name: r0, also: [{ file: new Blob([bytes as Uint8Array<ArrayBuffer>]), name: 'rank1-of-3.safetensors' }], doctor: true }, () => {}, () => fakeWorker('run').w).done.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StudioFailure);
    expect((err as StudioFailure).kind).toBe('bad-file');
    expect((err as StudioFailure).message).toBe(`rank1-of-3.safetensors: cannot merge: config.num_processes 3, ${r0} has 2`);
  });
});
