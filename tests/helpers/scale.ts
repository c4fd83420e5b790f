// x *= factor over n elements, in place (shaders/test_scale.wgsl, the GPU layer tests' own kernel), dispatched by
// hand under the kernel name the errors and timings report: the simplest dispatch whose result depends on the
// order of the dispatches and on each one's params.
import type { Recorder } from '../../src/gpu/context.ts';

const WG = 256;

export function scale(rec: Recorder, x: GPUBuffer, n: number, factor: number, opts: { kernel?: string; workgroups?: number } = {}): void {
  rec.dispatch({
    kernel: opts.kernel ?? 'scale',
    shader: 'test_scale',
    constants: { WG },
    bindings: { x },
    params: [['n', 'u32', n], ['factor', 'f32', factor]],
    workgroups: [opts.workgroups ?? Math.ceil(n / WG)],
  });
}
