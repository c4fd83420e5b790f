// Kernel arguments checked by name (src/gpu/layout.ts entryInterface / bindByName, applied by the recorder
// when it builds a dispatch's pipeline): a launcher names its buffers and params words as the shader does,
// and a misspelt, missing or extra binding, or params out of the struct's order or type, is refused with
// an error naming the kernel, the binding and the shader file, before anything is submitted (only own enumerable
// bindings count; a hole in the params list is named; fast-check holds bindByName's one-pass check, which every
// dispatch runs, to the rules that word its refusals). Then every
// entry point under shaders/ is driven through its launcher once, so every kernel the project ships is
// known to pass the check (the bench_* shaders are bench/loss.ts's own and are checked when it runs; test_scale is
// the GPU layer's tests' own, dispatched by hand here and in tests/gpu).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { GpuError, type Gpu, type Recorder } from '../../src/gpu/context.ts';
import { bindByName, entryInterface } from '../../src/gpu/layout.ts';
import { resolveIncludes } from '../../src/gpu/wgsl.ts';
import { ATTENTION_KERNELS, attention_backward, attention_forward } from '../../src/kernels/attention.ts';
import { colsum_forward } from '../../src/kernels/colsum.ts';
import { column_copy_forward } from '../../src/kernels/column_copy.ts';
import { embedding_backward, embedding_forward } from '../../src/kernels/embedding.ts';
import { gelu_backward, gelu_forward } from '../../src/kernels/gelu.ts';
import { clip_coef_forward, sumsq_forward } from '../../src/kernels/grad_norm.ts';
import { grpo_loss_backward, grpo_loss_forward } from '../../src/kernels/grpo_loss.ts';
import { kl_forward } from '../../src/kernels/kl.ts';
import { layernorm_backward, layernorm_forward } from '../../src/kernels/layernorm.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/kernels/logprob_gather.ts';
import { loss_reduce_forward } from '../../src/kernels/loss_reduce.ts';
import { gemmKernels, matmul_backward, matmul_forward } from '../../src/kernels/matmul.ts';
import { adamw_step, sgd_step } from '../../src/kernels/optimizer.ts';
import { ppo_loss_forward } from '../../src/kernels/ppo_loss.ts';
import { sample_forward } from '../../src/kernels/sample.ts';
import { residual_accumulate, residual_forward } from '../../src/kernels/residual.ts';
import { rmsnorm_backward, rmsnorm_forward } from '../../src/kernels/rmsnorm.ts';
import { rope_backward, rope_forward } from '../../src/kernels/rope.ts';
import { silu_gate_backward, silu_gate_forward } from '../../src/kernels/silu_gate.ts';
import { trl_loss_backward, trl_loss_forward } from '../../src/kernels/trl_loss.ts';
import { PPO_INPUTS, type TrlLossParams } from '../../src/kernels/types.ts';
import { testGpu } from '../helpers/gpu.ts';
import { scale } from '../helpers/scale.ts';

const SHADERS = join(import.meta.dirname, '..', '..', 'shaders');
const read = (n: string) => readFileSync(join(SHADERS, `${n}.wgsl`), 'utf8');

const TOY = `
  struct Params { n: u32, scale: f32, _p0: u32, _p1: u32 }
  @group(0) @binding(0) var<storage, read> inp: array<f32>;
  @group(0) @binding(1) var<storage, read_write> out: array<f32>;
  @group(0) @binding(2) var<uniform> p: Params;
  @compute @workgroup_size(1) fn main() { out[0] = inp[0] * p.scale + f32(p.n); }`;

describe('an entry point read off its WGSL', () => {
  it('gives its storage variables in binding order and its params struct, padding included', () => {
    expect(entryInterface(TOY, 'main')).toEqual({
      storage: ['inp', 'out'],
      params: [
        { name: 'n', type: 'u32' },
        { name: 'scale', type: 'f32' },
        { name: '_p0', type: 'u32' },
        { name: '_p1', type: 'u32' },
      ],
    });
  });

  it('refuses a shader that breaks the binding convention or packs a non-scalar param', () => {
    const gap = TOY.replace('@binding(1)', '@binding(3)').replace('@binding(2) var<uniform>', '@binding(4) var<uniform>');
    expect(() => entryInterface(gap, 'main')).toThrow(/@binding\(1\) is unused while a later binding is used/);
    const uniformFirst = TOY.replace('@binding(0) var<storage, read> inp', '@binding(2) var<storage, read> inp').replace('@binding(2) var<uniform>', '@binding(0) var<uniform>');
    expect(() => entryInterface(uniformFirst, 'main')).toThrow(/@binding\(1\) "out" follows the params uniform/);
    expect(() => entryInterface(TOY.replace('scale: f32', 'scale: vec2f'), 'main')).toThrow(/field "scale: vec2f" is not a u32, i32 or f32/);
  });
});

describe('a launcher held to the shader by name', () => {
  const iface = entryInterface(TOY, 'main');
  const words: Array<[string, 'u32' | 'f32', number]> = [
    ['n', 'u32', 1],
    ['scale', 'f32', 2],
  ];

  it('orders the named buffers by the shader, whatever order the launcher wrote them in', () => {
    expect(bindByName(iface, { out: 'OUT', inp: 'INP' }, words)).toEqual(['INP', 'OUT']);
  });

  it('refuses a misspelt, a missing or an extra binding, naming it', () => {
    expect(() => bindByName(iface, { inp: 1, outp: 2 }, words)).toThrow('binding "outp" is not a storage variable of the entry point (it binds inp, out)');
    expect(() => bindByName(iface, { inp: 1 }, words)).toThrow('binding "out" is not given (given: inp)');
    expect(() => bindByName(iface, { inp: 1, out: 2, bias: 3 }, words)).toThrow(/binding "bias" is not a storage variable/);
  });

  it('takes only own enumerable bindings: an inherited or hidden one is not given', () => {
    expect(() => bindByName(iface, Object.assign(Object.create({ out: 2 }), { inp: 1 }), words)).toThrow('binding "out" is not given (given: inp)');
    const hidden = Object.defineProperty({ extra: 3 } as Record<string, number>, 'inp', { value: 1, enumerable: false });
    hidden.out = 2;
    expect(() => bindByName(iface, hidden, words)).toThrow(/binding "extra" is not a storage variable/);
    expect(() => bindByName(iface, { inp: 1, out: 2 }, [words[0], , ] as unknown as typeof words)).toThrow('params word 1 is missing (a hole in the launcher\'s params list)');
  });

  it('agrees with its own rules on any launcher: either the storage in binding order or the rule that fails, never a bare refusal', () => {
    const names = fc.subarray(['inp', 'out', 'bias', 'outp'], { minLength: 0 });
    const fields = ['n', 'scale', '_p0', '_p1', 'extra'];
    const param = fc.tuple(fc.constantFrom(...fields), fc.constantFrom('u32' as const, 'f32' as const), fc.integer());
    fc.assert(
      fc.property(names, fc.option(fc.array(param, { maxLength: 6 }), { nil: undefined }), (given, params) => {
        const bindings = Object.fromEntries(given.map((name, i) => [name, i]));
        const exact = given.length === 2 && given.includes('inp') && given.includes('out');
        const ok = exact && params !== undefined && params.length >= 2 && params.length <= 4 && params.every(([name, type], i) => name === ['n', 'scale', '_p0', '_p1'][i] && type === (i === 1 ? 'f32' : 'u32'));
        let result: unknown;
        try {
          result = bindByName(iface, bindings, params);
        } catch (e) {
          expect((e as Error).message).not.toMatch(/do not match/);
          expect(ok).toBe(false);
          return;
        }
        expect(ok).toBe(true);
        expect(result).toEqual([bindings.inp, bindings.out]);
      }),
      { numRuns: 400 },
    );
  });

  it('refuses params out of order, of the wrong type, short, too long or absent; trailing padding may be left out', () => {
    expect(() => bindByName(iface, { inp: 1, out: 2 }, [words[1], words[0]])).toThrow('params word 0 is "scale: f32", the params struct has "n: u32" there');
    expect(() => bindByName(iface, { inp: 1, out: 2 }, [['n', 'f32', 1], words[1]])).toThrow(/params word 0 is "n: f32"/);
    expect(() => bindByName(iface, { inp: 1, out: 2 }, [words[0]])).toThrow('params field "scale" is not written');
    const five: Array<[string, 'u32', number]> = ['n', 'scale', '_p0', '_p1', 'extra'].map((name) => [name, 'u32', 0]);
    expect(() => bindByName(iface, { inp: 1, out: 2 }, [words[0], words[1], ...five.slice(2)])).toThrow(/params word 4 "extra" is past the end/);
    expect(() => bindByName(iface, { inp: 1, out: 2 }, undefined)).toThrow(/params \(n, scale, _p0, _p1\) are not written/);
    expect(bindByName(iface, { inp: 1, out: 2 }, [...words, ['_p0', 'u32', 0]])).toEqual([1, 2]);
  });
});

describe('the recorder refuses a dispatch whose names do not match its shader', () => {
  /** Records a good scale, then `bad`, and expects the submit to fail naming `bad`'s kernel, with nothing run. */
  async function refused(gpu: Gpu, bad: (rec: Recorder, x: GPUBuffer) => void): Promise<GpuError> {
    const x = gpu.upload('x', new Float32Array(256).fill(1));
    const rec = gpu.recorder('outer recorder');
    scale(rec, x, 256, 2);
    bad(rec, x);
    const err = await rec.submit().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GpuError);
    expect(gpu.openRecorderCount).toBe(0);
    // Refused while encoding: the command buffer was never submitted, so the good scale before it did not run.
    expect((await gpu.readF32(x))[0]).toBe(1);
    x.destroy();
    return err as GpuError;
  }

  it('a misspelt binding', async () => {
    const gpu = await testGpu();
    const err = await refused(gpu, (rec, x) =>
      rec.dispatch({ kernel: 'misnamed scale', shader: 'test_scale', bindings: { y: x }, params: [['n', 'u32', 256], ['factor', 'f32', 2]], workgroups: [1] }),
    );
    expect(err.kernel).toBe('misnamed scale');
    expect(err.kind).toBe('validation');
    expect(err.message).toBe('[validation] misnamed scale: shaders/test_scale.wgsl (entry point main): binding "y" is not a storage variable of the entry point (it binds x)');
  });

  it('a binding the entry point uses left out, and params in the wrong order', async () => {
    const gpu = await testGpu();
    const missing = await refused(gpu, (rec, x) =>
      rec.dispatch({ kernel: 'residual without b', shader: 'residual_forward', bindings: { a: x, out: gpu.zeros(1024) }, params: [['n', 'u32', 256]], workgroups: [1] }),
    );
    expect(missing.message).toBe('[validation] residual without b: shaders/residual_forward.wgsl (entry point main): binding "b" is not given (given: a, out)');
    const swapped = await refused(gpu, (rec, x) =>
      rec.dispatch({ kernel: 'swapped params', shader: 'test_scale', bindings: { x }, params: [['factor', 'f32', 2], ['n', 'u32', 256]], workgroups: [1] }),
    );
    expect(swapped.message).toMatch(/^\[validation\] swapped params: shaders\/test_scale\.wgsl \(entry point main\): params word 0 is "factor: f32"/);
  });
});

/** Every compute entry point of every shader the project ships (bench_* are the benchmark's own, test_* the tests'). */
function shippedEntryPoints(): string[] {
  return readdirSync(SHADERS)
    .filter((f) => f.endsWith('.wgsl') && !f.startsWith('bench_') && !f.startsWith('test_'))
    .flatMap((f) => {
      const name = f.slice(0, -5);
      return [...read(name).matchAll(/@compute[^{]*?\bfn\s+(\w+)/g)].map((m) => `${name}:${m[1]}`);
    });
}

describe('every kernel the project ships', () => {
  it('has an interface its launchers can be held to', () => {
    const entries = shippedEntryPoints();
    expect(entries.length).toBeGreaterThan(30);
    for (const e of entries) {
      const [shader, entry] = e.split(':');
      expect(() => entryInterface(resolveIncludes(shader, read), entry), e).not.toThrow();
    }
  });

  it('passes the check through its launcher', async () => {
    const gpu = await testGpu();
    const made: GPUBuffer[] = [];
    const buf = (elems: number) => {
      const b = gpu.createBuffer('arg', elems * 4);
      made.push(b);
      return b;
    };
    const [B, T, N, C, V, H, D] = [2, 3, 6, 8, 16, 2, 4];
    const BT = B * T;
    const policy = { beta: 0.1, epsilon_low: 0.2, epsilon_high: 0.2, delta: 2, importance_sampling_level: 'token' as const };
    const trl: TrlLossParams = {
      B, T, loss_type: 'grpo', importance_sampling_level: 'token', beta: 0.1, use_bias_correction_kl: false, epsilon_low: 0.2, epsilon_high: 0.2,
      delta: null, vllm_is_mode: 'off', vllm_is_min: null, vllm_is_max: null, off_policy_mask_threshold: null, entropy_threshold: null,
      sapo_temperature_pos: 1, sapo_temperature_neg: 1, vespo_k_pos: 1, vespo_lambda_pos: 1, vespo_k_neg: 1, vespo_lambda_neg: 1,
      max_completion_length: T, gradient_accumulation_steps: 1, num_items_in_batch: BT, num_processes: 1, ranks: 1, entropy_coef: 0,
    };
    const trlBuffers = () => ({ logp: buf(BT), aux: buf(4 * BT), advantages: buf(B), tok: buf(4 * BT), rows: buf(8 * B), hasOld: true, hasSampling: false });
    const attention = { B: 1, Hq: H, Hkv: 1, D, scale: 0.5 };
    const launchers: Array<(rec: Recorder) => void> = [
      ...ATTENTION_KERNELS.flatMap((kernel) => [
        (rec: Recorder) => attention_forward(rec, { ...attention, Tq: T, Tk: T, TkvMax: T, out: buf(T * H * D), q: buf(T * H * D), k: buf(T * D), v: buf(T * D), attentionMask: buf(T), lse: buf(H * T), kernel }),
        (rec: Recorder) =>
          attention_backward(rec, {
            ...attention, T, dq: buf(T * H * D), dk: buf(T * D), dv: buf(T * D), dout: buf(T * H * D), q: buf(T * H * D), k: buf(T * D), v: buf(T * D),
            out: buf(T * H * D), lse: buf(H * T), attentionMask: buf(T), kernel,
          }),
      ]),
      (rec) => colsum_forward(rec, { out: buf(C), inp: buf(2 * C), P: 2, C, accumulate: false }),
      (rec) => column_copy_forward(rec, { dst: buf(N * C), src: buf(N * 2 * C), rows: N, cols: C, srcLd: 2 * C, srcCol: C, dstLd: C, dstCol: 0 }),
      (rec) => embedding_forward(rec, { out: buf(N * C), ids: buf(N), wte: buf(V * C), wpe: buf(N * C), positionIds: buf(N), N, C, V, P: N }),
      (rec) => embedding_backward(rec, { dwte: buf(V * C), dwpe: buf(N * C), dout: buf(N * C), ids: buf(N), positionIds: buf(N), N, C, V, P: N, accumulate: false }),
      (rec) => gelu_forward(rec, { out: buf(N), inp: buf(N), n: N }),
      (rec) => gelu_backward(rec, { dinp: buf(N), inp: buf(N), dout: buf(N), n: N }),
      (rec) => sumsq_forward(rec, { inputs: [{ inp: buf(N), n: N }], out: buf(1) }),
      (rec) => clip_coef_forward(rec, { sumsq: buf(2), P: 2, maxNorm: 1, clip: buf(3) }),
      (rec) =>
        grpo_loss_forward(rec, {
          logp: buf(BT), oldLogp: buf(BT), kl: buf(BT), advantages: buf(B), mask: buf(BT), loss: buf(BT), ratio: buf(BT), clip: buf(BT), B, T, params: policy,
        }),
      (rec) =>
        grpo_loss_backward(rec, {
          logp: buf(BT), refLogp: buf(BT), advantages: buf(B), mask: buf(BT), ratio: buf(BT), stats: buf(16), dlogp: buf(BT), token_weight: buf(BT), B, T,
          params: { ...policy, kl_estimator: 'k3', loss_type: 'grpo', max_completion_length: T },
        }),
      (rec) => kl_forward(rec, { logp: buf(N), refLogp: buf(N), kl: buf(N), n: N, estimator: 'k3' }),
      (rec) => layernorm_forward(rec, { out: buf(N * C), mean: buf(N), rstd: buf(N), inp: buf(N * C), weight: buf(C), bias: buf(C), N, C, eps: 1e-5 }),
      (rec) =>
        layernorm_backward(rec, {
          dinp: buf(N * C), dweight: buf(C), dbias: buf(C), dout: buf(N * C), inp: buf(N * C), weight: buf(C), mean: buf(N), rstd: buf(N), N, C, accumulate: false,
        }),
      (rec) => logprob_gather_forward(rec, { logits: buf(N * V), ids: buf(N), mask: buf(N), N, V, temperature: 1, logp: buf(N), lse: buf(2 * N), entropy: buf(N) }),
      (rec) =>
        logprob_gather_backward(rec, {
          logits: buf(N * V), ids: buf(N), mask: buf(N), N, V, temperature: 1, lse: buf(2 * N), dlogp: buf(N), dlogits: buf(N * V), dentropy: { dentropy: buf(N), entropy: buf(N) },
        }),
      (rec) => loss_reduce_forward(rec, { loss: buf(BT), mask: buf(BT), clip: buf(BT), out: buf(16), B, T, max_completion_length: T }),
      // Penalties, top-k and top-p on: the variant with every binding the shader declares.
      (rec) =>
        sample_forward(rec, {
          logits: buf(B * V), counts: buf(B * V), eos: buf(1), n_eos: 1, eos_masked: false, ids: buf(B), logps: buf(B), B, V, seed: 1, step: 0,
          params: { greedy: false, temperature: 0.7, top_k: 5, top_p: 0.9, min_p: 0.05, repetition_penalty: 1.1, presence_penalty: 0.1, frequency_penalty: 0.1 },
        }),
      // Few rows and an [out, in] weight: the row kernel; an [in, out] weight: the tiled GEMM.
      (rec) => matmul_forward(rec, { out: buf(N * V), inp: buf(N * C), weight: buf(V * C), bias: buf(V), M: N, K: C, N: V, weightLayout: 'out_in' }),
      (rec) => matmul_forward(rec, { out: buf(N * V), inp: buf(N * C), weight: buf(C * V), M: N, K: C, N: V, weightLayout: 'in_out' }),
      // Every kernel matmul_forward has, forced: which ones it picks by default depends on the adapter.
      ...(['rows', ...gemmKernels(gpu)] as const).map((kernel) => (rec: Recorder) => matmul_forward(rec, { out: buf(N * V), inp: buf(N * C), weight: buf(V * C), M: N, K: C, N: V, weightLayout: 'out_in', kernel })),
      // The direct kernel's one-element entry point (main): an ld that is not a multiple of 4 (its vec4 one takes the rest).
      (rec) => matmul_forward(rec, { out: buf(N * V), inp: buf(N * (C - 1)), weight: buf(V * (C - 1)), M: N, K: C - 1, N: V, weightLayout: 'out_in', kernel: 'direct' }),
      (rec) =>
        matmul_backward(rec, {
          dinp: buf(N * C), dweight: buf(V * C), dbias: buf(V), dout: buf(N * V), inp: buf(N * C), weight: buf(V * C), M: N, K: C, N: V, weightLayout: 'out_in', accumulate: false,
        }),
      (rec) => adamw_step(rec, { tensors: [{ param: buf(N), grad: buf(N), m: buf(N), v: buf(N), n: N, weightDecay: 0 }], clip: buf(3), out: buf(1), lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 1 }),
      (rec) => sgd_step(rec, { tensors: [{ param: buf(N), grad: buf(N), n: N, weightDecay: 0 }], clip: buf(3), out: buf(1), lr: 1e-3 }),
      (rec) => sgd_step(rec, { tensors: [{ param: buf(N), grad: buf(N), n: N, weightDecay: 0, buf: buf(N) }], clip: buf(3), out: buf(1), lr: 1e-3, momentum: 0.9 }),
      (rec) =>
        ppo_loss_forward(rec, {
          logp: buf(BT), entropy: buf(BT), inputs: buf(PPO_INPUTS.length * BT), out: buf(4 * BT), dlogp: buf(BT), dentropy: buf(BT), B, T,
          params: { mode: 'clip', kl: 'k3', eps_low: 0.2, eps_high: 0.2, dual_clip: 0, ratio_clamp: 0, kl_inner: Infinity, kl_outer: Infinity, kl_coef: 0.1, ent_coef: 0, tau_pos: 1, tau_neg: 1, kl_cov_coef: 0, geo_seq_is: false },
        }),
      (rec) => residual_forward(rec, { out: buf(N), a: buf(N), b: buf(N), n: N }),
      (rec) => residual_accumulate(rec, { dst: buf(N), src: buf(N), n: N }),
      (rec) => rmsnorm_forward(rec, { out: buf(N * C), rstd: buf(N), inp: buf(N * C), weight: buf(C), N, C, eps: 1e-6 }),
      (rec) => rmsnorm_backward(rec, { dinp: buf(N * C), dweight: buf(C), dout: buf(N * C), inp: buf(N * C), weight: buf(C), rstd: buf(N), N, C, accumulate: false }),
      (rec) => rope_forward(rec, { x: buf(N * H * D), positionIds: buf(N), N, H, D, theta: 10000 }),
      (rec) => rope_forward(rec, { x: buf(N * H * D), k: buf(N * D), Hk: 1, positionIds: buf(N), N, H, D, theta: 10000 }),
      (rec) => rope_backward(rec, { dx: buf(N * H * D), positionIds: buf(N), N, H, D, theta: 10000 }),
      (rec) => silu_gate_forward(rec, { out: buf(N), gate: buf(N), up: buf(N), n: N }),
      (rec) => silu_gate_backward(rec, { dgate: buf(N), dup: buf(N), dout: buf(N), gate: buf(N), up: buf(N), n: N }),
      (rec) => trl_loss_forward(rec, { ...trlBuffers(), entropy: buf(BT) }, trl),
      (rec) => trl_loss_backward(rec, { ...trlBuffers(), dlogp: buf(BT), dentropy: buf(BT), totals: buf(2 * trl.ranks) }, trl),
    ];
    const built = new Set<string>();
    const spy = vi.spyOn(gpu.cache, 'pipeline');
    try {
      for (const launch of launchers) {
        const rec = gpu.recorder('launcher');
        launch(rec);
        await rec.submit(); // a name that does not match its shader rejects here, naming kernel, binding and file
      }
      for (const [shader, , entryPoint] of spy.mock.calls) built.add(`${shader}:${entryPoint ?? 'main'}`);
    } finally {
      spy.mockRestore();
      for (const b of made) b.destroy();
    }
    expect(shippedEntryPoints().filter((e) => !built.has(e))).toEqual([]);
  });
});
