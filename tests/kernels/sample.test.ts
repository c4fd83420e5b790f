// shaders/sample_forward.wgsl against its reference, the CPU sampler (src/model/sampler.ts sample_step:
// float64, same settings, same RNG stream), on odd vocabularies (37, 1,000, 50,257), every combination of
// temperature / greedy, top-k, top-p, min-p, penalties and min_new_tokens masking, extreme logits (±1e4,
// −inf, ties) and the error rows. f32 may pick another token only where the uniform, or a top-p / min-p
// threshold, lies within rounding of a boundary: each draw is first checked on the CPU for stability
// under small moves of u, top_p and min_p, and the stable ones (nearly all) must match exactly. Also at 1,024
// threads a row (a GPU's default), and workgroup sizes past the device's limits refused by name.
import { beforeAll, describe, expect, it } from 'vitest';

// lavapipe compiles each pipeline variant (top-k / top-p / penalties on or off, per workgroup size) cold in
// tens of seconds on a loaded machine: the grids get room for their compiles.
const COMPILES = 600_000;
import type { Gpu } from '../../src/gpu/context.ts';
import { SAMPLE_BAD_LOGIT, SAMPLE_NOTHING_LEFT, sample_forward, usesCounts, type SampleParams } from '../../src/kernels/sample.ts';
import { Rng } from '../../src/model/rng.ts';
import { DEFAULT_SAMPLING, choose, process_logits, uniform, type RowState, type SamplingSettings } from '../../src/model/sampler.ts';
import { asAdapterClass, spyDispatches, testGpu } from '../helpers/gpu.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await testGpu();
});

const EOS = [3, 5];
const paramsOf = (s: SamplingSettings): SampleParams => ({ ...s, greedy: !s.do_sample || s.temperature === 0 });

/** One case: B rows of logits, the rows' histories (penalty counts, min_new_tokens) and the settings. */
interface Case {
  logits: Float32Array; // (B, V)
  states: RowState[];
  s: SamplingSettings;
  seed: number;
  step: number;
}

/** Runs every case as its own dispatch of one submit (slot = case index); returns ids, log-probs and counts after. */
async function onGpu(cases: Case[], B: number, V: number, wg?: number) {
  const rec = gpu.recorder('sample test');
  const ids = gpu.createBuffer('ids', cases.length * B * 4);
  const logps = gpu.createBuffer('logps', cases.length * B * 4);
  const eos = gpu.upload('eos', Uint32Array.from(EOS));
  const counts = cases.map((c) => {
    if (!usesCounts(paramsOf(c.s))) return null;
    const h = new Uint32Array(B * V); // (B, V) what the CPU counts: the completion (and the prompt in that scope)
    c.states.forEach((st, b) => {
      const seen = c.s.penalty_scope === 'prompt+completion' ? [...Array.from(st.prompt_ids), ...Array.from(st.completion_ids)] : Array.from(st.completion_ids);
      for (const id of seen) h[b * V + id]++;
    });
    return gpu.upload('counts', h);
  });
  // Each case gets its own slot: its RNG counter must then be its slot too, so the slot is the step.
  cases.forEach((c, k) => {
    expect(c.step).toBe(k);
    sample_forward(rec, {
      logits: gpu.upload('logits', c.logits),
      counts: counts[k],
      eos,
      n_eos: EOS.length,
      eos_masked: c.states[0].completion_ids.length < c.s.min_new_tokens,
      ids,
      logps,
      B,
      V,
      seed: c.seed,
      step: k,
      params: paramsOf(c.s),
      wg,
    });
  });
  await rec.submit();
  const got = { ids: new Int32Array(await gpu.read(ids)), logps: await gpu.readF32(logps), counts: [] as (Uint32Array | null)[] };
  for (const c of counts) got.counts.push(c ? await gpu.readU32(c) : null);
  return got;
}

/** The CPU's draw for row b at uniform u (and its log-prob), or null where the row has no distribution. */
function cpuDraw(c: Case, b: number, V: number, u: number, s = c.s): { tok: number; logp: number } | null {
  let p;
  try {
    p = process_logits(c.logits.subarray(b * V, (b + 1) * V), [c.states[b]], s);
  } catch {
    return null;
  }
  const greedy = !s.do_sample || s.temperature === 0;
  const tok = choose(p, 0, V, greedy, u);
  return { tok, logp: p.logprobs[tok] };
}

/** True when the CPU's draw does not move under small changes of u, top_p and min_p (f32 cannot tell these apart). */
function stable(c: Case, b: number, V: number): boolean {
  const u = uniform(c.seed, b, c.step);
  const ref = cpuDraw(c, b, V, u);
  if (!ref) return false;
  // f32 sums of up to 50k terms hold the CDF to a few 1e-7 (u moves 2e-6); thresholds move only when on.
  const du = 2e-6;
  const d = 2e-5;
  const moves: [number, SamplingSettings][] = [
    [Math.max(0, u - du), c.s],
    [Math.min(1 - 1e-12, u + du), c.s],
  ];
  if (c.s.top_p < 1) moves.push([u, { ...c.s, top_p: Math.min(1, c.s.top_p * (1 + d)) }], [u, { ...c.s, top_p: c.s.top_p * (1 - d) }]);
  if (c.s.min_p > 0) moves.push([u, { ...c.s, min_p: c.s.min_p * (1 + 1e-3) }], [u, { ...c.s, min_p: c.s.min_p * (1 - 1e-3) }]);
  return moves.every(([uu, s]) => {
    const m = cpuDraw(c, b, V, uu, s);
    // A token of tiny mass moving across a threshold changes the log-prob by its mass: within tolerance.
    return m !== null && m.tok === ref.tok && Math.abs(m.logp - ref.logp) < 1e-5;
  });
}

/** Compares every stable draw; returns how many were compared. f32 log-probs: a few ulps of the largest |z|. */
async function compare(cases: Case[], B: number, V: number, wg?: number): Promise<number> {
  const got = await onGpu(cases, B, V, wg);
  let compared = 0;
  cases.forEach((c, k) => {
    for (let b = 0; b < B; b++) {
      if (!stable(c, b, V)) continue;
      const ref = cpuDraw(c, b, V, uniform(c.seed, b, c.step))!;
      const label = `case ${k} row ${b} V ${V} ${JSON.stringify({ ...c.s, eos_token_ids: undefined })}`;
      expect(got.ids[k * B + b], label).toBe(ref.tok);
      let zmax = 1;
      for (let v = 0; v < V; v++) if (Number.isFinite(c.logits[b * V + v])) zmax = Math.max(zmax, Math.abs(c.logits[b * V + v]));
      const T = c.s.do_sample && c.s.temperature > 0 ? c.s.temperature : 1;
      expect(Math.abs(got.logps[k * B + b] - ref.logp), label).toBeLessThanOrEqual(1e-5 + 4e-7 * (zmax / T + Math.abs(ref.logp)));
      compared++;
    }
    const h = got.counts[k];
    if (h) {
      // The sampled token joined its row's counts: exactly one more than the history, nowhere else.
      for (let b = 0; b < B; b++) {
        const seen = c.s.penalty_scope === 'prompt+completion' ? [...Array.from(c.states[b].prompt_ids), ...Array.from(c.states[b].completion_ids)] : Array.from(c.states[b].completion_ids);
        const want = new Uint32Array(V);
        for (const id of seen) want[id]++;
        want[got.ids[k * B + b]]++;
        expect(Array.from(h.subarray(b * V, (b + 1) * V)), `counts case ${k} row ${b}`).toEqual(Array.from(want));
      }
    }
  });
  return compared;
}

/** Rows of N(0, scale²) logits with a few planted ties and histories of `hist` tokens. */
function rows(rng: Rng, B: number, V: number, scale: number, hist: number): { logits: Float32Array; states: RowState[] } {
  const logits = rng.f32(B * V, scale);
  for (let b = 0; b < B; b++) {
    // A tie at the top and one in the middle, so top-k / top-p meet tied tokens.
    const top = Math.max(...logits.subarray(b * V, (b + 1) * V));
    for (const v of [1, Math.floor(V / 2)]) logits[b * V + v] = top;
    logits[b * V + V - 1] = logits[b * V + 2];
  }
  const states = Array.from({ length: B }, () => ({
    prompt_ids: Array.from({ length: 4 }, () => rng.int(0, V - 1)),
    completion_ids: Array.from({ length: hist }, () => rng.int(0, V - 1)),
  }));
  return { logits, states };
}

const GRID: Partial<SamplingSettings>[] = [];
for (const temperature of [1, 0.7, 0])
  for (const top_k of [0, 5, 40])
    for (const top_p of [1, 0.9, 0.5])
      for (const min_p of [0, 0.05])
        for (const pen of [{}, { repetition_penalty: 1.3, presence_penalty: 0.5, frequency_penalty: 0.2 }, { repetition_penalty: 0.8, penalty_scope: 'prompt+completion' as const }])
          GRID.push({ temperature, top_k, top_p, min_p, ...pen });

describe('sample_forward equals the CPU sampler', () => {
  for (const V of [37, 1000]) {
    it(`V = ${V}: every combination of temperature, top-k, top-p, min-p and penalties, with and without EOS masking`, async () => {
      const rng = new Rng(V);
      const B = 3;
      let compared = 0;
      for (const masked of [false, true]) {
        const cases: Case[] = GRID.map((o, k) => ({
          ...rows(rng, B, V, 3, 2),
          s: { ...DEFAULT_SAMPLING, eos_token_ids: EOS, min_new_tokens: masked ? 3 : 0, ...o },
          seed: 1000 + k,
          step: k,
        }));
        compared += await compare(cases, B, V);
      }
      // The stability filter drops only draws next to a boundary: nearly all are compared.
      expect(compared).toBeGreaterThan(0.9 * 2 * GRID.length * B);
    }, COMPILES);
  }

  const MAIN: Partial<SamplingSettings>[] = [{}, { temperature: 0.6 }, { top_k: 50 }, { top_p: 0.9 }, { top_k: 40, top_p: 0.8, temperature: 1.3 }, { min_p: 0.1 }, { temperature: 0 }, { repetition_penalty: 1.2, frequency_penalty: 0.1 }];
  const mainCases = (rng: Rng, B: number, V: number, settings = MAIN): Case[] => settings.map((o, k) => ({ ...rows(rng, B, V, 4, 5), s: { ...DEFAULT_SAMPLING, ...o }, seed: 2 ** 40 + 12345 * k, step: k }));

  it("16 threads a row (SwiftShader's, at any vocabulary): V = 1,000 and 50,257 under the main settings", async () => {
    const rng = new Rng(17);
    for (const V of [1000, 50257]) expect(await compare(mainCases(rng, 2, V), 2, V, 16)).toBeGreaterThanOrEqual(0.9 * MAIN.length * 2);
    // A SwiftShader-class view picks 16 threads for the biggest vocabulary too.
    const view = asAdapterClass(gpu, 'swiftshader');
    const V = 151936;
    const bufs = [view.createBuffer('l', 2 * V * 4), ...[1, 2, 2].map((n) => view.createBuffer('s', n * 4))];
    const rec = view.recorder('sample wg');
    const wgs = spyDispatches(rec, (d) => d.constants?.WG ?? null); // every dispatch, one with no WG too
    sample_forward(rec, { logits: bufs[0], counts: null, eos: bufs[1], n_eos: 0, eos_masked: false, ids: bufs[2], logps: bufs[3], B: 2, V, seed: 1, step: 0, params: paramsOf({ ...DEFAULT_SAMPLING, top_k: 5 }) });
    await rec.submit();
    expect(wgs).toEqual([16]);
    bufs.forEach((x) => x.destroy());
  }, COMPILES);

  it('V = 50,257: a GPT-2-sized row under the main settings, seeds beyond 2^32', async () => {
    const [V, B] = [50257, 2];
    expect(await compare(mainCases(new Rng(7), B, V), B, V)).toBeGreaterThanOrEqual(0.9 * MAIN.length * B);
  }, COMPILES);

  it("1,024 threads a row (a GPU's default for a big vocabulary): V = 50,257 under the main settings; a size over the device's limits is refused", async () => {
    const [V, B] = [50257, 3];
    // A GPU-class view of the test device picks 1,024 for this vocabulary: asking for it explicitly then makes no new pipeline.
    const view = asAdapterClass(gpu, 'gpu');
    const [one] = mainCases(new Rng(8), B, V, [{ top_k: 7, top_p: 0.7, min_p: 0.01 }]);
    const run = async (wg?: number) => {
      const before = view.cache.pipelineCount;
      const rec = view.recorder('sample wg');
      const bufs = [view.upload('l', one.logits), ...[1, B, B].map((n) => view.createBuffer('s', n * 4))];
      sample_forward(rec, { logits: bufs[0], counts: null, eos: bufs[1], n_eos: 0, eos_masked: false, ids: bufs[2], logps: bufs[3], B, V, seed: 1, step: 0, params: paramsOf(one.s), wg });
      await rec.submit();
      bufs.forEach((x) => x.destroy());
      return view.cache.pipelineCount - before;
    };
    await run();
    expect(await run(1024)).toBe(0);
    expect(await compare(mainCases(new Rng(9), B, V), B, V, 1024)).toBeGreaterThanOrEqual(0.9 * MAIN.length * B);
    // Sizes past the device's limits are refused by name. Dawn counts this kernel's workgroup memory as 28,768
    // bytes at 1,024 threads (its validation message on a device limited below that): a device with exactly that
    // much takes 1,024, one with a byte less 512.
    const limits = (bytes: number) => new Proxy(gpu.limits, { get: (l, k) => (k === 'maxComputeWorkgroupStorageSize' ? bytes : Reflect.get(l, k, l)) });
    const limited = (bytes: number) => Object.create(gpu, { limits: { value: limits(bytes) } }) as Gpu;
    const bufs = [V, 1, 1, 1].map((n) => gpu.createBuffer('s', n * 4));
    const tryWg = (g: Gpu, wg: number) => {
      const rec = g.recorder('sample limits');
      try {
        sample_forward(rec, { logits: bufs[0], counts: null, eos: bufs[1], n_eos: 0, eos_masked: false, ids: bufs[2], logps: bufs[3], B: 1, V, seed: 1, step: 0, params: paramsOf(one.s), wg });
      } finally {
        void rec.submit();
      }
    };
    expect(() => tryWg(gpu, 4096)).toThrow(/workgroup size 4096 is over this device's 1024/);
    expect(() => tryWg(limited(28768), 1024)).not.toThrow();
    expect(() => tryWg(limited(28767), 1024)).toThrow(/workgroup size 1024 is over this device's 512/);
    expect(() => tryWg(gpu, 8)).toThrow(/power of two from 16/);
    await gpu.device.queue.onSubmittedWorkDone();
    bufs.forEach((x) => x.destroy());
  }, COMPILES);

  it('follows the RNG stream: flat rows pick floor(u·V) across rows, steps and 53-bit seeds', async () => {
    // Equal logits make the inverse CDF a direct read of u (token ⌊u·V⌋), so every bit of the hash that
    // reaches f32 is checked, draw by draw, against the CPU's uniform.
    const V = 4099;
    const B = 8;
    const cases: Case[] = Array.from({ length: 24 }, (_, k) => ({
      logits: new Float32Array(B * V),
      states: Array.from({ length: B }, () => ({ prompt_ids: [0], completion_ids: [] })),
      s: { ...DEFAULT_SAMPLING },
      seed: [0, 1, 2 ** 32 + 5, 2 ** 53 - 1][k % 4],
      step: k,
    }));
    const got = await onGpu(cases, B, V);
    let compared = 0;
    cases.forEach((c, k) => {
      for (let b = 0; b < B; b++) {
        const x = uniform(c.seed, b, c.step) * V;
        if (Math.abs(x - Math.round(x)) < 1e-3) continue; // within f32 rounding of a token boundary
        expect(got.ids[k * B + b], `seed ${c.seed} row ${b} step ${c.step}`).toBe(Math.floor(x));
        expect(got.logps[k * B + b]).toBeCloseTo(-Math.log(V), 5);
        compared++;
      }
    });
    expect(compared).toBeGreaterThan(0.95 * cases.length * B);
  }, COMPILES);
});

describe('sample_forward on extreme rows', () => {
  const V = 37;
  const base = (): Float32Array => new Float32Array(V).fill(-Infinity);

  it('±1e4 logits, −inf everywhere but a few tokens, and ties at the k-th value (all kept) and at the top-p cut (lowest ids)', async () => {
    const big = base();
    big[4] = 1e4;
    big[9] = 1e4 - 1; // p ≈ 0.27 against 0.73
    big[20] = -1e4;
    const ties = base();
    for (const v of [2, 6, 11, 30]) ties[v] = 5; // four tied at the top: top_k 2 keeps all four
    ties[12] = 1;
    const cut = base();
    for (const v of [8, 13, 21, 27, 33]) cut[v] = 0; // five at 0.2: top_p 0.5 walks 0.2, 0.4 (< 0.5), 0.6 → keeps 8, 13, 21
    const cases: Case[] = [
      { logits: big, s: { ...DEFAULT_SAMPLING } },
      { logits: big, s: { ...DEFAULT_SAMPLING, temperature: 0 } },
      { logits: ties, s: { ...DEFAULT_SAMPLING, top_k: 2 } },
      { logits: ties, s: { ...DEFAULT_SAMPLING, top_k: 2, temperature: 0 } },
      { logits: cut, s: { ...DEFAULT_SAMPLING, top_p: 0.5 } },
      { logits: cut, s: { ...DEFAULT_SAMPLING, top_p: 0.5, temperature: 3 } },
    ].map((c, k) => ({ ...c, states: [{ prompt_ids: [0], completion_ids: [] }], seed: 99, step: k }));
    // Many draws of each: the ids drawn are exactly the kept set, each with the CPU's log-prob.
    const draws = 40;
    const all: Case[] = [];
    for (let r = 0; r < draws; r++) for (const c of cases) all.push({ ...c, seed: 99 + r, step: all.length });
    const got = await onGpu(all, 1, V);
    const seen = cases.map(() => new Set<number>());
    all.forEach((c, k) => {
      const ref = cpuDraw(c, 0, V, uniform(c.seed, 0, c.step))!;
      expect(got.ids[k], `case ${k % cases.length}`).toBe(ref.tok);
      expect(got.logps[k]).toBeCloseTo(ref.logp, 4);
      seen[k % cases.length].add(got.ids[k]);
    });
    expect([...seen[2]].sort((a, b) => a - b)).toEqual([2, 6, 11, 30]);
    expect([...seen[3]]).toEqual([2]); // greedy: the lowest tied id
    expect([...seen[4]].sort((a, b) => a - b)).toEqual([8, 13, 21]);
    expect([...seen[1]]).toEqual([4]);
  }, COMPILES);

  it('reports a NaN or +inf logit (−1) and a row with nothing left after min_new_tokens (−2)', async () => {
    const nan = new Float32Array(V);
    nan[7] = NaN;
    const inf = new Float32Array(V);
    inf[7] = Infinity;
    const onlyEos = base();
    for (const e of EOS) onlyEos[e] = 0;
    const st = [{ prompt_ids: [0], completion_ids: [] }];
    const s = { ...DEFAULT_SAMPLING, eos_token_ids: EOS, min_new_tokens: 2 };
    const got = await onGpu(
      [
        { logits: nan, states: st, s, seed: 1, step: 0 },
        { logits: inf, states: st, s: { ...s, temperature: 0 }, seed: 1, step: 1 },
        { logits: onlyEos, states: st, s, seed: 1, step: 2 },
        { logits: onlyEos, states: st, s: { ...s, min_new_tokens: 0 }, seed: 1, step: 3 },
      ],
      1,
      V,
    );
    expect(Array.from(got.ids.subarray(0, 3))).toEqual([SAMPLE_BAD_LOGIT, SAMPLE_BAD_LOGIT, SAMPLE_NOTHING_LEFT]);
    expect(EOS).toContain(got.ids[3]); // unmasked, the EOS ids are the only tokens
  });
});
