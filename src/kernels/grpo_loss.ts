// Launchers for shaders/grpo_loss_{forward,backward}.wgsl: TRL's per-token GRPO loss, importance ratio and
// clip flags, and dloss/dlogp for one aggregation. One workgroup per sequence (B workgroups).
import { Gpu, type ParamWord, type Recorder } from '../gpu/context.ts';
import { AGGREGATIONS, type KlEstimator, type LossType, type PolicyLossParams } from './types.ts';
import { STATS } from './loss_reduce.ts';
import { bindAll } from './windows.ts';

const WG = 128;

function policyWords(p: PolicyLossParams): ParamWord[] {
  return [
    ['beta', 'f32', p.beta],
    ['eps_low', 'f32', p.epsilon_low],
    ['eps_high', 'f32', p.epsilon_high],
    ['delta', 'f32', p.delta ?? 0],
    ['has_delta', 'u32', p.delta === null ? 0 : 1],
  ];
}

export function grpo_loss_forward(
  rec: Recorder,
  args: {
    logp: GPUBuffer; // (B, T)
    oldLogp: GPUBuffer; // (B, T)
    kl: GPUBuffer; // (B, T)
    advantages: GPUBuffer; // (B)
    mask: GPUBuffer; // (B, T) i32
    loss: GPUBuffer; // (B, T) written: per_token_loss
    ratio: GPUBuffer; // (B, T) written: r before the δ cap
    clip: GPUBuffer; // (B, T) u32 written: CLIP_LOW | CLIP_HIGH | DELTA_BINDS
    B: number;
    T: number;
    params: PolicyLossParams;
  },
): void {
  const BT = args.B * args.T;
  rec.dispatch({
    kernel: 'grpo_loss_forward',
    shader: 'grpo_loss_forward',
    constants: { WG, SEQUENCE_LEVEL: args.params.importance_sampling_level === 'sequence' },
    bindings: bindAll(rec.gpu, 'grpo_loss_forward', {
      logp: [args.logp, BT], old_logp: [args.oldLogp, BT, 'oldLogp'], kl: [args.kl, BT], advantages: [args.advantages, args.B],
      mask: [args.mask, BT], loss: [args.loss, BT], ratio: [args.ratio, BT], clip: [args.clip, BT],
    }),
    params: [['B', 'u32', args.B], ['T', 'u32', args.T], ...policyWords(args.params)],
    workgroups: Gpu.grid(args.B),
  });
}

/**
 * Compiles grpo_loss_backward for every aggregation (LOSS_TYPE is an override constant: one pipeline each)
 * ahead of use, so a what-if that switches loss_type never waits for a shader compile.
 */
export function grpo_loss_backward_warm(gpu: Gpu, p: { kl_estimator: KlEstimator; importance_sampling_level: PolicyLossParams['importance_sampling_level'] }): void {
  for (let i = 0; i < AGGREGATIONS.length; i++) {
    gpu.cache.pipeline('grpo_loss_backward', { WG, SEQUENCE_LEVEL: p.importance_sampling_level === 'sequence', LOSS_TYPE: i, KL_ESTIMATOR: Number(p.kl_estimator.slice(1)) });
  }
}

export function grpo_loss_backward(
  rec: Recorder,
  args: {
    logp: GPUBuffer; // (B, T)
    refLogp: GPUBuffer; // (B, T)
    advantages: GPUBuffer; // (B)
    mask: GPUBuffer; // (B, T) i32
    ratio: GPUBuffer; // (B, T) from the forward
    stats: GPUBuffer; // (16) from loss_reduce_forward
    dlogp: GPUBuffer; // (B, T) written
    token_weight: GPUBuffer; // (B, T) written: ∂loss/∂per_token_loss = c_b·M
    B: number;
    T: number;
    params: PolicyLossParams & { kl_estimator: KlEstimator; loss_type: LossType; max_completion_length: number; num_items_in_batch?: number; loss_scale_factor?: number };
  },
): void {
  const p = args.params;
  const BT = args.B * args.T;
  rec.dispatch({
    kernel: 'grpo_loss_backward',
    shader: 'grpo_loss_backward',
    constants: {
      WG,
      SEQUENCE_LEVEL: p.importance_sampling_level === 'sequence',
      LOSS_TYPE: AGGREGATIONS.indexOf(p.loss_type),
      KL_ESTIMATOR: Number(p.kl_estimator.slice(1)),
    },
    bindings: bindAll(rec.gpu, 'grpo_loss_backward', {
      logp: [args.logp, BT], ref_logp: [args.refLogp, BT, 'refLogp'], advantages: [args.advantages, args.B], mask: [args.mask, BT],
      ratio: [args.ratio, BT], stats: [args.stats, STATS.size], dlogp: [args.dlogp, BT], token_weight: [args.token_weight, BT],
    }),
    params: [
      ['B', 'u32', args.B],
      ['T', 'u32', args.T],
      ...policyWords(p),
      ['max_completion_length', 'f32', p.max_completion_length],
      ['num_items_in_batch', 'f32', p.num_items_in_batch ?? 0],
      ['loss_scale_factor', 'f32', p.loss_scale_factor ?? args.T],
    ],
    workgroups: Gpu.grid(args.B),
  });
}
