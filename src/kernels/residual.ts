// Launchers for shaders/residual_{forward,backward}.wgsl: the residual add out = a + b, and the
// in-place accumulate dst += src that is the residual's backward (each branch's gradient is added
// into the stream's gradient). Twin: src/oracle/residual.ts.
import { dispatchElementwise } from './elementwise.ts';
import type { Recorder } from '../gpu/context.ts';

/** dst += src (n elements). dst and src must be different buffers. */
export function residual_accumulate(rec: Recorder, args: { dst: GPUBuffer /* (n) */; src: GPUBuffer /* (n) */; n: number }): void {
  dispatchElementwise(rec, { kernel: 'residual_accumulate', shader: 'residual_backward', n: args.n, buffers: { dst: args.dst, src: args.src }, readWrite: ['dst'] });
}

/** out = a + b. out may be a or b (then it is an in-place add: WebGPU cannot bind one buffer both ways). */
export function residual_forward(rec: Recorder, args: { out: GPUBuffer; a: GPUBuffer; b: GPUBuffer; n: number }): void {
  const { out, a, b, n } = args;
  if (out === a) return residual_accumulate(rec, { dst: a, src: b, n });
  if (out === b) return residual_accumulate(rec, { dst: b, src: a, n });
  dispatchElementwise(rec, { kernel: 'residual_forward', shader: 'residual_forward', n, buffers: { a, b, out } });
}
