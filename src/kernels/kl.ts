// Launcher for shaders/kl_forward.wgsl (per-token KL of the policy to the reference).
import { Gpu, packParams, type Recorder } from '../gpu/context.ts';
import type { KlEstimator } from '../ref/kl.ts';

const WG = 256;

export function kl_forward(
  rec: Recorder,
  args: {
    logp: GPUBuffer; // (N) f32
    refLogp: GPUBuffer; // (N) f32
    kl: GPUBuffer; // (N) f32, written
    n: number;
    estimator: KlEstimator;
  },
): void {
  rec.dispatch({
    kernel: 'kl_forward',
    shader: 'kl_forward',
    constants: { WG, KL_ESTIMATOR: Number(args.estimator.slice(1)) },
    bindings: [args.logp, args.refLogp, args.kl],
    params: packParams([['u32', args.n]]),
    workgroups: Gpu.grid(Math.ceil(args.n / WG)),
  });
}
