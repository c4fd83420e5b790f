// Benchmark suite `doctor`: time and memory of reading (parseBatch) and diagnosing (validator + every rule,
// no tokenizer) a grpo-batch/v1 batch of 64 … 1,024 rows of 2,560 tokens (512 prompt + 2,048 completion),
// and of one 400k-token row. Issue 13 asks every rule to be linear in batch size and row length, so the
// `us_per_ktoken` column must not grow with the batch. The 400k rows are adversarial (see longRow). The
// batches enable the trainer rules (vLLM IS correction, a logged KL) so they are measured too.
// CPU only: no GPU is opened.
import { diagnose } from '../src/doctor/index.ts';
import { parseBatch, serializeBatch, type GrpoBatch } from '../src/io/batch.ts';
import type { BenchOptions, Row } from './types.ts';

const PAD = 0;
const EOS = 2;

/** A realistic batch: left-padded prompts, completions ending in EOS then right padding, every per-token field. */
function batchOf(B: number, P: number, C: number): GrpoBatch {
  const G = 8;
  const rows = (f: (b: number, t: number) => number, n: number) => Array.from({ length: B }, (_, b) => Array.from({ length: n }, (_, t) => f(b, t)));
  const pads = (b: number) => (b * 37) % 64; // left pads of prompt row b
  const end = (b: number) => C - 1 - ((b * 101) % 512); // position of the EOS in completion row b
  const completion_ids = rows((b, t) => (t < end(b) ? 3 + ((b * 7 + t * 13) % 50_000) : t === end(b) ? EOS : PAD), C);
  return {
    format: 'grpo-batch/v1',
    num_generations: G,
    pad_token_id: PAD,
    eos_token_ids: [EOS],
    prompt_ids: rows((b, t) => (t < pads(b) ? PAD : 3 + ((Math.floor(b / G) * 11 + t * 17) % 50_000)), P),
    prompt_mask: rows((b, t) => (t < pads(b) ? 0 : 1), P),
    completion_ids,
    completion_mask: rows((b, t) => (t <= end(b) ? 1 : 0), C),
    rewards: Array.from({ length: B }, (_, b) => (b * 0.37) % 1),
    old_per_token_logps: rows((b, t) => -((b + t) % 97) / 10, C),
    ref_per_token_logps: rows((b, t) => -((b + 2 * t) % 89) / 10, C),
    sampling_per_token_logps: rows((b, t) => -((b + t) % 97) / 10 - 0.001, C),
    // vLLM IS correction on and a logged KL: the trainer rules (importance-sampling-correction, logged-kl) do their full work.
    config: { scale_rewards: 'group', max_completion_length: C, use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5, vllm_importance_sampling_clip_max: 2 },
    metrics: { kl: 0.5 },
  };
}

/**
 * One 400k-token row built to hit the formerly quadratic paths: a completion opening with the prompt's
 * repeated tail (prompt-leak search) and then either 100k pads masked in (mask-covers-padding's run
 * finder: 18 s before) or 200k real tokens after the EOS masked in (eos-inside-completion: 87 s before).
 */
function longRow(after: 'pads' | 'tokens'): GrpoBatch {
  const [P, C, tail] = after === 'pads' ? [100_000, 300_000, 100_000] : [1_000, 399_000, 200_000];
  const prompt = Array.from({ length: P }, (_, t) => (t < P - 1 ? 5 : 6)); // 5 5 5 … 5 6
  const eosAt = C - tail - 1;
  const completion = Array.from({ length: C }, (_, t) => (t < P - 1 ? 5 : t < eosAt ? 7 + (t % 1000) : t === eosAt ? EOS : after === 'pads' ? PAD : 9));
  return {
    format: 'grpo-batch/v1',
    num_generations: 1,
    pad_token_id: PAD,
    eos_token_ids: [EOS],
    prompt_ids: [prompt],
    completion_ids: [completion],
    completion_mask: [completion.map(() => 1)],
    rewards: [1],
  };
}

/** `npm run bench` runs node with --expose-gc, so heap figures are live data, not garbage not yet collected. */
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const REPS = 3;

function measure(label: string, batch: GrpoBatch, rowTokens: number): Row {
  const text = serializeBatch(batch);
  const parseMs: number[] = [];
  const doctorMs: number[] = [];
  let heapDoctor = 0;
  let findings = 0;
  for (let r = 0; r < REPS; r++) {
    gc();
    const t0 = performance.now();
    const parsed = parseBatch(text, label);
    const t1 = performance.now();
    gc();
    const heap1 = process.memoryUsage().heapUsed;
    const t2 = performance.now();
    const report = diagnose(parsed);
    const t3 = performance.now();
    heapDoctor = Math.max(heapDoctor, process.memoryUsage().heapUsed - heap1); // held after the Doctor ran, batch excluded (a lower bound on its allocation)
    findings = report.findings.length;
    parseMs.push(t1 - t0);
    doctorMs.push(t3 - t2);
  }
  const median = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const B = batch.completion_ids.length;
  const doctor = median(doctorMs);
  return {
    case: label,
    rows: B,
    tokens: B * rowTokens,
    file_mb: text.length / 2 ** 20,
    parse_ms: median(parseMs),
    doctor_ms: doctor,
    us_per_ktoken: (doctor * 1000) / ((B * rowTokens) / 1000),
    doctor_alloc_mb: heapDoctor / 2 ** 20,
    rss_mb: process.memoryUsage().rss / 2 ** 20,
    findings,
  };
}

export async function run(_gpu: unknown, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  const sizes = opts.quick ? [64, 128, 256] : [64, 128, 256, 512, 1024];
  measure('warmup', batchOf(16, 512, 2048), 2560); // JIT
  for (const B of sizes) rows.push(measure(`${B} x 2560`, batchOf(B, 512, 2048), 2560));
  rows.push(measure('1 x 400k, pads masked', longRow('pads'), 400_000));
  rows.push(measure('1 x 400k, after EOS', longRow('tokens'), 400_000));
  return rows;
}
