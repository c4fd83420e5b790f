// TRL per-token loss kernels (shaders/trl_loss_{forward,backward}.wgsl): one invocation per row, so the cost
// grows with T per row and the GPU is busy only with B ≥ a few hundred rows. Next to the logprob gather over V
// (bench/loss.ts) it should stay small; this suite shows where (B, T) makes it not so. 50,000 rows of 3 tokens
// (a mismatch check over many short completions) is where the backward's per-process totals were once summed by every
// row's invocation (O(B²): 70 s of `grpo-studio mismatch` on lavapipe); shaders/trl_loss_totals.wgsl makes it O(B).
import type { Gpu } from '../src/gpu/context.ts';
import { TRL_ROW_STATS, trl_loss_backward, trl_loss_forward } from '../src/kernels/trl_loss.ts';
import type { TrlLossParams } from '../src/kernels/types.ts';
import type { BenchOptions, Row } from './types.ts';
import { timeKernels } from './timing.ts';

const CONFIGS: Array<[string, Partial<TrlLossParams>]> = [
  ['grpo token, β, vLLM token_truncate', { loss_type: 'grpo', beta: 0.04, vllm_is_mode: 'token_truncate', vllm_is_max: 2 }],
  ['dapo sequence, entropy bonus', { loss_type: 'dapo', importance_sampling_level: 'sequence', entropy_coef: 0.01 }],
];

function params(B: number, T: number, o: Partial<TrlLossParams>): TrlLossParams {
  return {
    B, T, loss_type: 'grpo', importance_sampling_level: 'token', beta: 0, use_bias_correction_kl: false, epsilon_low: 0.2, epsilon_high: 0.28,
    delta: null, vllm_is_mode: 'off', vllm_is_min: null, vllm_is_max: null, off_policy_mask_threshold: null, entropy_threshold: null,
    sapo_temperature_pos: 1, sapo_temperature_neg: 1.05, vespo_k_pos: 2, vespo_lambda_pos: 3, vespo_k_neg: 3, vespo_lambda_neg: 2,
    max_completion_length: T, gradient_accumulation_steps: 1, num_items_in_batch: B * T, num_processes: 1, ranks: 1, entropy_coef: 0, ...o,
  };
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const shapes = opts.quick ? [[8, 512], [64, 128], [4096, 3]] : [[8, 4096], [64, 1024], [256, 512], [1024, 256], [50_000, 3]];
  const rows: Row[] = [];
  for (const [B, T] of shapes) {
    const N = B * T;
    const aux = new Float32Array(4 * N);
    for (let i = 0; i < N; i++) aux.set([-1.1, -1.3, -1.05, 1], 4 * i);
    const bufs = {
      logp: gpu.upload('logp', new Float32Array(N).fill(-1)),
      entropy: gpu.upload('entropy', new Float32Array(N).fill(1.5)),
      aux: gpu.upload('aux', aux),
      advantages: gpu.upload('advantages', Float32Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1))),
      tok: gpu.createBuffer('tok', 16 * N),
      rows: gpu.createBuffer('rows', 4 * TRL_ROW_STATS * B),
      dlogp: gpu.createBuffer('dlogp', 4 * N),
      dentropy: gpu.createBuffer('dentropy', 4 * N),
      totals: gpu.createBuffer('totals', 8), // one rank (params: ranks 1)
      hasOld: true,
      hasSampling: true,
    };
    for (const [name, o] of CONFIGS) {
      const p = params(B, T, o);
      const t = await timeKernels(gpu, 'trl_loss', (rec) => {
        trl_loss_forward(rec, bufs, p);
        trl_loss_backward(rec, bufs, p);
      }, { reps: opts.quick ? 3 : 10 });
      rows.push({ B, T, config: name, ms: t.ms, timer: t.timer, 'ns/token': (t.ms * 1e6) / N });
    }
    for (const b of Object.values(bufs)) if (typeof b === 'object') b.destroy();
  }
  return rows;
}
