// Launchers for shaders/silu_gate_{forward,backward}.wgsl: the Llama/Qwen MLP activation
// out = silu(gate) * up, gate and up in separate (N, I) buffers (n = N * I). Twin: src/oracle/silu_gate.ts.
// dgate and dup are overwritten.
import { dispatchElementwise } from './elementwise.ts';
import type { Recorder } from '../gpu/context.ts';

export function silu_gate_forward(
  rec: Recorder,
  args: { out: GPUBuffer /* (N, I) */; gate: GPUBuffer /* (N, I) */; up: GPUBuffer /* (N, I) */; n: number },
): void {
  dispatchElementwise(rec, { kernel: 'silu_gate_forward', shader: 'silu_gate_forward', n: args.n, buffers: { gate: args.gate, up: args.up, out: args.out } });
}

export function silu_gate_backward(
  rec: Recorder,
  args: {
    dgate: GPUBuffer; // (N, I)
    dup: GPUBuffer; // (N, I)
    dout: GPUBuffer; // (N, I)
    gate: GPUBuffer; // (N, I), forward input
    up: GPUBuffer; // (N, I), forward input
    n: number;
  },
): void {
  dispatchElementwise(rec, {
    kernel: 'silu_gate_backward',
    shader: 'silu_gate_backward',
    n: args.n,
    buffers: { gate: args.gate, up: args.up, dout: args.dout, dgate: args.dgate, dup: args.dup },
  });
}
