// Chunked scoring (src/model/score.ts): a headless forward, then the LM head and the log-prob / entropy
// gather over row chunks. Per-token log-probs, entropies and log-sum-exps equal the full-logits path (a
// forward with logits, then one gather) on every golden tiny model for odd chunk sizes
// (CausalLM.logitsChunkRows), with and without saved activations, the golden log-probs hold, and the
// chunked path never allocates the (B·C, V) logits.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { padBatch } from '../../src/grpo/batch.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { parseSafeTensors, toF64 } from '../../src/io/safetensors.ts';
import { CausalLM } from '../../src/model/model.ts';
import { logprob_gather_forward } from '../../src/kernels/logprob_gather.ts';
import { logitsChunkRows } from '../../src/model/memory.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';

describe.each(GOLDEN_MODELS)('%s', (m) => {
  it('chunked scoring equals the full-logits path and the golden log-probs; no (B·C, V) buffer', async () => {
    const gpu = await testGpu();
    const model = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
    const padded = padBatch(parseBatch(readFileSync(join(GOLDEN, m, 'batch.json'), 'utf8')));
    const n = padded.B * padded.C;
    const V = model.config.vocab_size;
    const read = async (s: ReturnType<typeof score_completions>) => ({
      logp: await gpu.readF32(s.per_token_logps, n), ent: await gpu.readF32(s.per_token_entropy, n), lse: await gpu.readF32(s.lse, 2 * n),
    });
    // The full-logits path: (B·C, V) logits from one forward, one gather over them.
    let rec = gpu.recorder('full');
    const f = model.forward(rec, { B: padded.B, T: padded.L, input_ids: padded.input_ids, attention_mask: padded.attention_mask, position_ids: padded.position_ids }, { logits_to_keep: padded.C });
    const full = { logp: gpu.createBuffer('logp', n * 4), lse: gpu.createBuffer('lse', n * 8), entropy: gpu.createBuffer('entropy', n * 4) };
    const ids = gpu.upload('ids', padded.completion_ids);
    const mask = gpu.upload('mask', padded.completion_mask);
    logprob_gather_forward(rec, { logits: f.logits, ids, mask, ...full, N: n, V, temperature: 1, skipMasked: false });
    await rec.submit();
    const want = { logp: await gpu.readF32(full.logp, n), ent: await gpu.readF32(full.entropy, n), lse: await gpu.readF32(full.lse, 2 * n) };
    for (const [chunkRows, save] of [[1, false], [5, true], [7, false], [n, true]] as const) {
      model.logitsChunkRows = chunkRows;
      const created = vi.spyOn(gpu, 'createBuffer');
      rec = gpu.recorder('chunked');
      const s = score_completions(rec, model, padded, { save });
      await rec.submit();
      // The biggest logits buffer allocated is one chunk, never (B·C, V).
      const logitsBytes = created.mock.calls.filter(([label]) => /logits/.test(label)).map(([, bytes]) => bytes);
      expect(Math.max(...logitsBytes)).toBe(chunkRows * V * 4);
      created.mockRestore();
      const got = await read(s);
      // Same kernels row by row: agreement to f32 rounding of a differently tiled head GEMM.
      expectClose(got.logp, want.logp, { rtol: 1e-6, atol: 1e-6, label: `${m} logp chunk ${chunkRows}` });
      expectClose(got.ent, want.ent, { rtol: 1e-6, atol: 1e-6, label: `${m} entropy chunk ${chunkRows}` });
      expectClose(got.lse, want.lse, { rtol: 1e-6, atol: 1e-6, label: `${m} lse chunk ${chunkRows}` });
      s.destroy();
    }
    // README: per_token_logps rtol 1e-4, atol 1e-5 where completion_mask = 1 (default chunking).
    model.logitsChunkRows = null;
    rec = gpu.recorder('default');
    const d = score_completions(rec, model, padded);
    await rec.submit();
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, m, 'golden.safetensors'))));
    expectClose(await gpu.readF32(d.per_token_logps, n), toF64(st, 'per_token_logps'), { rtol: 1e-4, atol: 1e-5, mask: padded.completion_mask, label: `${m} golden logp` });
    [...Object.values(full), ids, mask].forEach((b) => b.destroy());
    d.destroy();
    model.destroy();
  });
});

describe('logitsChunkRows', () => {
  it('fills one storage binding of at most 128 MiB, at least one row, at most every row', () => {
    expect(logitsChunkRows(151936, 2048, 128 * 2 ** 20)).toBe(220); // 220 × 151936 × 4 ≤ 128 MiB
    expect(logitsChunkRows(97, 30, 128 * 2 ** 20)).toBe(30);
    expect(logitsChunkRows(10 ** 9, 30, 128 * 2 ** 20)).toBe(1);
    expect(logitsChunkRows(151936, 2048, 2 ** 31)).toBe(220); // a device binding 2 GiB still gets 128 MiB chunks
  });
});
