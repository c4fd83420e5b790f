// Launcher for shaders/kl_forward.wgsl (per-token KL of the policy to the reference).
import { Gpu, type Recorder } from '../gpu/context.ts';
import type { KlEstimator } from './types.ts';
import { bindAll } from './windows.ts';

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
  const n = args.n;
  rec.dispatch({
    kernel: 'kl_forward',
    shader: 'kl_forward',
    constants: { WG, KL_ESTIMATOR: Number(args.estimator.slice(1)) },
    bindings: bindAll(rec.gpu, 'kl_forward', { logp: [args.logp, n], ref_logp: [args.refLogp, n, 'refLogp'], kl: [args.kl, n] }),
    params: [['n', 'u32', n]],
    workgroups: Gpu.grid(Math.ceil(n / WG)),
  });
}
