// Launchers for shaders/gelu_{forward,backward}.wgsl: GPT-2's gelu_new (tanh approximation).
// Twin: src/oracle/gelu.ts. dinp is overwritten; out/dinp must not alias their inputs.
import { dispatchElementwise } from './elementwise.ts';
import type { Recorder } from '../gpu/context.ts';

export function gelu_forward(rec: Recorder, args: { out: GPUBuffer /* (n) */; inp: GPUBuffer /* (n) */; n: number }): void {
  dispatchElementwise(rec, { kernel: 'gelu_forward', shader: 'gelu_forward', n: args.n, buffers: { inp: args.inp, out: args.out } });
}

export function gelu_backward(
  rec: Recorder,
  args: { dinp: GPUBuffer /* (n) */; inp: GPUBuffer /* (n), the forward's input */; dout: GPUBuffer /* (n) */; n: number },
): void {
  dispatchElementwise(rec, { kernel: 'gelu_backward', shader: 'gelu_backward', n: args.n, buffers: { inp: args.inp, dout: args.dout, dinp: args.dinp } });
}
