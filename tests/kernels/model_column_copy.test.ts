// column_copy_forward (GPT-2's c_attn split / dqkv merge) against its float64 twin on odd sizes:
// the copied block must match exactly and every other column of dst must keep its value.
import { describe, expect, it } from 'vitest';
import { column_copy_forward } from '../../src/kernels/column_copy.ts';
import { column_copy_forward as columnCopyRef } from '../../src/oracle/column_copy.ts';
import { testGpu } from '../helpers/gpu.ts';
import { Rng } from '../../src/model/rng.ts';

describe('column_copy_forward', () => {
  it('splits (N, 3C) into column blocks and merges them back, exactly', async () => {
    const gpu = await testGpu();
    const rng = new Rng(5);
    const rows = 1031; // not a multiple of the workgroup
    const C = 37;
    const src = rng.f32(rows * 3 * C);
    const before = rng.f32(rows * 3 * C); // merge target starts non-zero: untouched columns must survive
    const srcBuf = gpu.upload('src', src);
    const parts = [0, 1, 2].map((i) => gpu.createBuffer(`part${i}`, rows * C * 4));
    const merged = gpu.upload('merged', before);
    const rec = gpu.recorder('column_copy');
    parts.forEach((dst, i) => column_copy_forward(rec, { dst, src: srcBuf, rows, cols: C, srcLd: 3 * C, srcCol: i * C, dstLd: C, dstCol: 0 }));
    // Merge only blocks 0 and 2 back: block 1 of `merged` must keep `before`.
    [0, 2].forEach((i) => column_copy_forward(rec, { dst: merged, src: parts[i], rows, cols: C, srcLd: C, srcCol: 0, dstLd: 3 * C, dstCol: i * C }));
    await rec.submit();
    for (let i = 0; i < 3; i++) {
      const want = new Float64Array(rows * C);
      columnCopyRef(want, src, rows, C, 3 * C, i * C, C, 0);
      expect(Array.from(await gpu.readF32(parts[i], rows * C)), `part ${i}`).toEqual(Array.from(Float32Array.from(want)));
    }
    const want = Float64Array.from(before);
    for (const i of [0, 2]) columnCopyRef(want, src, rows, C, 3 * C, i * C, 3 * C, i * C);
    expect(Array.from(await gpu.readF32(merged, rows * 3 * C))).toEqual(Array.from(Float32Array.from(want)));
  });

  it('refuses a block that runs past a row', () => {
    return testGpu().then((gpu) => {
      const b = gpu.createBuffer('b', 64);
      expect(() => column_copy_forward(gpu.recorder('x'), { dst: b, src: b, rows: 2, cols: 5, srcLd: 8, srcCol: 4, dstLd: 8, dstCol: 0 })).toThrow(/exceed row lengths/);
    });
  });
});
