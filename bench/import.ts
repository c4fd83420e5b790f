// Import benchmark (issue 16): a TRL GRPOTrainer dict saved as safetensors with TRL's dtypes (int64 ids
// and masks, float32 log-probs), 1,024 rows of 512 prompt + 2,048 completion tokens (2,560 per row),
// read by readAnyBatch into grpo-batch/v1. Target: ≤ 3 s. CPU only; the GPU handle is unused.
import { readAnyBatch } from '../src/io/formats/index.ts';
import { writeSafeTensors, type TensorOut } from '../src/io/safetensors.ts';
import type { Gpu } from '../src/gpu/context.ts';
import type { BenchOptions, Row } from './types.ts';

/** int64 tensor whose low words are given (values fit in 32 bits, as token ids and masks do). */
function i64(shape: number[], value: (i: number) => number): TensorOut {
  const n = shape[0] * shape[1];
  const data = new BigInt64Array(n);
  const words = new Int32Array(data.buffer);
  for (let i = 0; i < n; i++) {
    const v = value(i);
    words[2 * i] = v;
    words[2 * i + 1] = v < 0 ? -1 : 0;
  }
  return { dtype: 'I64', shape, data };
}

function f32(shape: number[], value: (i: number) => number): TensorOut {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = value(i);
  return { dtype: 'F32', shape, data };
}

/** Token ids of a dump: `base + i % span` for text, `eos` to end a completion (the page benchmark keeps them inside the default model's vocabulary). */
export interface DumpIds {
  base: number;
  span: number;
  eos: number;
}

/** A TRL dump: prompts left-padded to P, completions right-padded to C with lengths spread over [C/4, C]. */
export function trlDump(B: number, P: number, C: number, ids: DumpIds = { base: 100, span: 7000, eos: 2 }): Uint8Array {
  const plen = (b: number) => P / 2 + ((b * 37) % (P / 2));
  const clen = (b: number) => C / 4 + ((b * 101) % ((3 * C) / 4));
  const inPrompt = (i: number) => i % P >= P - plen(Math.floor(i / P));
  const inCompletion = (i: number) => i % C < clen(Math.floor(i / C));
  return writeSafeTensors(
    {
      prompt_ids: i64([B, P], (i) => (inPrompt(i) ? ids.base + (i % ids.span) : 0)),
      prompt_mask: i64([B, P], (i) => +inPrompt(i)),
      completion_ids: i64([B, C], (i) => (inCompletion(i) ? (i % C === clen(Math.floor(i / C)) - 1 ? ids.eos : ids.base + (i % ids.span)) : 0)),
      completion_mask: i64([B, C], (i) => +inCompletion(i)),
      advantages: f32([B], (b) => ((b % 8) - 3.5) / 2.3),
      old_per_token_logps: f32([B, C], (i) => (inCompletion(i) ? -0.01 * (i % 300) : 0)),
      ref_per_token_logps: f32([B, C], (i) => (inCompletion(i) ? -0.011 * (i % 300) : 0)),
      sampling_per_token_logps: f32([B, C], (i) => (inCompletion(i) ? -0.0101 * (i % 300) : 0)),
      num_items_in_batch: { dtype: 'I64', shape: [], data: new BigInt64Array([123456n]) },
    },
    { config: JSON.stringify({ num_generations: 8, beta: 0.04, loss_type: 'dapo' }), rank: '0', num_processes: '1', pad_token_id: '0', eos_token_id: String(ids.eos) },
  );
}

export async function run(_gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const B of opts.quick ? [128] : [128, 1024]) {
    const P = 512;
    const C = 2048;
    const bytes = trlDump(B, P, C);
    const ms: number[] = [];
    let samples = 0;
    for (let rep = 0; rep < 3; rep++) {
      const t0 = performance.now();
      samples = readAnyBatch(bytes, 'trl.safetensors').batch.completion_ids.length;
      ms.push(performance.now() - t0);
    }
    ms.sort((a, b) => a - b);
    rows.push({ format: 'trl', rows: samples, tokens_per_row: P + C, file_MB: bytes.byteLength / 2 ** 20, median_ms: ms[1], min_ms: ms[0], target_ms: 3000 });
  }
  return rows;
}
