// Benchmark suite `mismatch` (issue 22): time of the train–inference mismatch analysis on the CPU — what
// `grpo-studio mismatch`, the page's worker and the offline report run — on a synthetic batch of B rows ×
// 2,560 tokens (512 prompt + 2,048 completion, as bench/doctor.ts and bench/import_page.ts count them), up to
// 1,024 rows. Timed apart: building the input (mismatchInputOf: the loss mask completion_mask × tool_mask),
// the analysis (analyseMismatch: distributions, top tokens, classes, diagnoses) and the heat rows
// (logRatioRows, the report's overlay). Target: input + analysis ≤ 2 s for 1,024 rows, printed beside the
// measurement, never asserted. CPU only: no GPU is opened.
import { analyseMismatch, logRatioRows, mismatchInputOf } from '../src/grpo/mismatch/analysis.ts';
import type { GrpoBatch } from '../src/io/batch.ts';
import { Rng } from '../src/model/rng.ts';
import type { BenchOptions, Row } from './types.ts';

const P = 512;
const C = 2048;
const V = 32; // logits per position: enough for realistic log-probs, cheap to draw for 2M positions
const EOS = 2;
const TOOL = 64; // tokens of each tool response on the multi-turn rows
const TARGET_MS = 2000;

/**
 * Per position, random logits z; the trainer's log-prob is log softmax(z)[x]. The sampler's: the same on
 * most rows (plus float noise), z + a perturbation on every 4th row (other weights: stale), log p + log 1/S
 * on every 4th + 1 (a top-p renormalisation); every 4th + 2 row is multi-turn (two tool responses,
 * tool_mask 0, sampling log-prob 0 there as TRL writes it). Tokens are drawn from the sampler's distribution.
 */
function batchOf(B: number, rng: Rng): GrpoBatch {
  const z = new Float64Array(V);
  const zs = new Float64Array(V);
  const lse = (a: Float64Array) => {
    let m = -Infinity;
    for (const v of a) m = Math.max(m, v);
    let s = 0;
    for (const v of a) s += Math.exp(v - m);
    return m + Math.log(s);
  };
  const batch: GrpoBatch = {
    format: 'grpo-batch/v1',
    num_generations: 8,
    pad_token_id: 0,
    eos_token_ids: [EOS],
    prompt_ids: [],
    completion_ids: [],
    completion_mask: [],
    tool_mask: [],
    old_per_token_logps: [],
    sampling_per_token_logps: [],
  };
  for (let b = 0; b < B; b++) {
    const [stale, topP, multi] = [b % 4 === 0, b % 4 === 1, b % 4 === 2];
    const offset = topP ? -Math.log(0.5 + 0.3 * rng.next()) : 0;
    const end = C - 1 - rng.int(0, 511); // the EOS; right padding after it
    const [ids, mask, tool, old, samp] = [new Array<number>(C), new Array<number>(C), new Array<number>(C), new Array<number>(C), new Array<number>(C)];
    for (let t = 0; t < C; t++) {
      if (t > end) {
        [ids[t], mask[t], tool[t], old[t], samp[t]] = [0, 0, 1, 0, 0];
        continue;
      }
      for (let k = 0; k < V; k++) z[k] = 4 * rng.next();
      for (let k = 0; k < V; k++) zs[k] = stale ? z[k] + 0.8 * (rng.next() - 0.5) : z[k];
      const [lt, ls] = [lse(z), lse(zs)];
      let u = rng.next();
      let x = V - 1;
      for (let k = 0; k < V; k++) if ((u -= Math.exp(zs[k] - ls)) <= 0) { x = k; break; }
      const inTool = multi && ((t >= 600 && t < 600 + TOOL) || (t >= 1200 && t < 1200 + TOOL));
      ids[t] = t === end ? EOS : 3 + x;
      mask[t] = 1;
      tool[t] = inTool ? 0 : 1;
      old[t] = z[x] - lt;
      samp[t] = inTool ? 0 : zs[x] - ls + offset + 1e-3 * (rng.next() - 0.5);
    }
    batch.prompt_ids.push(Array.from({ length: P }, (_, t) => 3 + ((b + t) % V)));
    batch.completion_ids.push(ids);
    batch.completion_mask.push(mask);
    batch.tool_mask!.push(tool);
    batch.old_per_token_logps!.push(old);
    batch.sampling_per_token_logps!.push(samp);
  }
  return batch;
}

/** `npm run bench` runs node with --expose-gc: each timing starts from a collected heap. */
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const REPS = 3;
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

function measure(B: number): Row {
  const t0 = performance.now();
  const batch = batchOf(B, new Rng(22));
  const buildBatch = performance.now() - t0;
  const [inputMs, analysisMs, heatMs] = [[] as number[], [] as number[], [] as number[]];
  let report: ReturnType<typeof analyseMismatch> | null = null;
  for (let r = 0; r < REPS; r++) {
    gc();
    const a = performance.now();
    const input = mismatchInputOf(batch);
    const b = performance.now();
    report = analyseMismatch(input);
    const c = performance.now();
    logRatioRows(input);
    const d = performance.now();
    [inputMs[r], analysisMs[r], heatMs[r]] = [b - a, c - b, d - c];
  }
  const [input, analysis] = [median(inputMs), median(analysisMs)];
  return {
    case: `${B} x ${P + C}`,
    rows: B,
    compared_tokens: report!.tokens,
    synth_ms: buildBatch,
    input_ms: input,
    analysis_ms: analysis,
    heat_rows_ms: median(heatMs),
    total_ms: input + analysis,
    target_ms: TARGET_MS,
    diagnoses: report!.diagnoses.map((x) => `${x.id}:${x.rows.length}`).join(' '),
    rss_mb: process.memoryUsage().rss / 2 ** 20,
  };
}

export async function run(_gpu: unknown, opts: BenchOptions): Promise<Row[]> {
  measure(32); // JIT
  return (opts.quick ? [128] : [256, 1024]).map(measure);
}
