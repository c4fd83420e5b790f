// Launcher for shaders/ppo_loss_forward.wgsl: verl's and OpenRLHF's per-token policy terms, KL, loss shares
// and ∂loss/∂logp, ∂loss/∂entropy for the log-prob backward. One workgroup per sequence (B workgroups).
import { Gpu, type Recorder } from '../gpu/context.ts';
import { PPO_INPUTS, PPO_KL, PPO_MODES, type PpoLossParams } from './types.ts';
import { bindAll } from './windows.ts';

const WG = 128;
// "No clamp" as a finite f32: shader compilers may assume arithmetic never sees infinities.
const F32_BIG = 3e38;
const finite = (x: number): number => (Number.isFinite(x) ? x : F32_BIG);

export function ppo_loss_forward(
  rec: Recorder,
  args: {
    logp: GPUBuffer; // (B, T)
    entropy: GPUBuffer; // (B, T)
    inputs: GPUBuffer; // (B, T, 8) in PPO_INPUTS order
    out: GPUBuffer; // (B, T, 4) written: L, KL, contrib, ratio
    dlogp: GPUBuffer; // (B, T) written
    dentropy: GPUBuffer; // (B, T) written
    B: number;
    T: number;
    params: PpoLossParams;
  },
): void {
  const { B, T, params: p } = args;
  const BT = B * T;
  const mode = PPO_MODES.indexOf(p.mode);
  if (mode < 0) throw new Error(`ppo_loss_forward: unknown policy mode "${p.mode}" (have ${PPO_MODES.join(', ')})`);
  rec.dispatch({
    kernel: 'ppo_loss_forward',
    shader: 'ppo_loss_forward',
    constants: { WG, KL: PPO_KL.indexOf(p.kl) },
    bindings: bindAll(rec.gpu, 'ppo_loss_forward', {
      logp: [args.logp, BT], entropy: [args.entropy, BT], inp: [args.inputs, PPO_INPUTS.length * BT, 'inputs'],
      outp: [args.out, 4 * BT, 'out'], dlogp: [args.dlogp, BT], dentropy: [args.dentropy, BT],
    }),
    params: [
      ['B', 'u32', B],
      ['T', 'u32', T],
      ['eps_low', 'f32', p.eps_low],
      ['eps_high', 'f32', p.eps_high],
      ['dual_clip', 'f32', p.dual_clip],
      ['ratio_clamp', 'f32', p.ratio_clamp],
      ['kl_inner', 'f32', finite(p.kl_inner)],
      ['kl_outer', 'f32', finite(p.kl_outer)],
      ['kl_coef', 'f32', p.kl_coef],
      ['ent_coef', 'f32', p.ent_coef],
      ['tau_pos', 'f32', p.tau_pos],
      ['tau_neg', 'f32', p.tau_neg],
      ['kl_cov_coef', 'f32', p.kl_cov_coef],
      ['geo_seq_is', 'u32', p.geo_seq_is ? 1 : 0],
      ['mode', 'u32', mode],
    ],
    workgroups: Gpu.grid(B),
  });
}
