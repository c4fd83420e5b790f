// The page side of the worker protocol (src/bridge/client.ts) over a fake port: answers are matched to
// requests by id in any order, a worker error becomes a StudioFailure with its category, load progress and
// a lost device arrive as events, and a worker that dies fails every pending request instead of hanging.
import { describe, expect, it } from 'vitest';
import { StudioClient, type PortLike } from '../../src/bridge/client.ts';
import { errorInfo, StudioFailure } from '../../src/bridge/errors.ts';
import type { RequestEnvelope, WorkerMessage } from '../../src/bridge/protocol.ts';
import { GpuError } from '../../src/gpu/context.ts';
import { BatchFormatError } from '../../src/io/batch.ts';
import { ModelLoadError } from '../../src/model/config.ts';

function fakePort() {
  const sent: RequestEnvelope[] = [];
  const port: PortLike = { postMessage: (m) => void sent.push(m), onmessage: null, onerror: null };
  const reply = (msg: WorkerMessage) => port.onmessage!({ data: msg } as MessageEvent<WorkerMessage>);
  return { port, sent, reply };
}

describe('StudioClient', () => {
  it('matches answers to requests by id and maps failures to their category', async () => {
    const { port, sent, reply } = fakePort();
    const client = new StudioClient(port, { onProgress: () => {}, onDeviceLost: () => {} });
    const a = client.request({ type: 'reset' });
    const b = client.request({ type: 'import-batch', file: new Blob(['{']), name: 'x.json' });
    expect(sent.map((m) => m.request.type)).toEqual(['reset', 'import-batch']);
    reply({ id: sent[1].id, ok: false, error: { kind: 'bad-file', message: 'x.json: not valid JSON' } });
    reply({ id: sent[0].id, ok: true, result: {} });
    await expect(a).resolves.toEqual({});
    const err = await b.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StudioFailure);
    expect(err).toMatchObject({ kind: 'bad-file', message: 'x.json: not valid JSON' });
  });

  it('passes progress and a lost device to the page, and fails pending requests when the worker dies', async () => {
    const { port, reply } = fakePort();
    const progress: string[] = [];
    const lost: string[] = [];
    const client = new StudioClient(port, { onProgress: (p) => progress.push(p.label), onDeviceLost: (e) => lost.push(e.kind) });
    reply({ event: 'progress', progress: { label: 'tokenizer', loaded: 0, total: 0 } });
    reply({ event: 'device-lost', error: { kind: 'device-lost', message: 'the GPU device was lost' } });
    expect(progress).toEqual(['tokenizer']);
    expect(lost).toEqual(['device-lost']);
    const pending = client.request({ type: 'init' });
    port.onerror!({ message: 'SyntaxError in worker' } as ErrorEvent);
    await expect(pending).rejects.toThrow(/studio worker failed: SyntaxError in worker/);
  });
});

describe('errorInfo', () => {
  it('puts each failure in the category the page shows', () => {
    const oom = errorInfo(new GpuError('out-of-memory', 'matmul_forward', 'buffer too large'));
    expect(oom.kind).toBe('out-of-memory');
    expect(oom.message).toMatch(/^\[out-of-memory\] matmul_forward: buffer too large — .*memory plan/);
    expect(errorInfo(new GpuError('device-lost', 'readF32', 'destroyed')).kind).toBe('device-lost');
    expect(errorInfo(new GpuError('unsupported', 'navigator.gpu', 'no WebGPU')).kind).toBe('no-webgpu');
    expect(errorInfo(new GpuError('validation', 'k', 'bad binding')).kind).toBe('gpu');
    expect(errorInfo(new BatchFormatError('completion_mask sample 5 has length 9')).kind).toBe('bad-file');
    expect(errorInfo(new ModelLoadError('unsupported architecture "MambaForCausalLM"'))).toMatchObject({ kind: 'unsupported-model', message: 'unsupported architecture "MambaForCausalLM"' });
    expect(errorInfo('plain string')).toEqual({ kind: 'internal', message: 'plain string' });
  });
});
