// process_logits, choose and the counter-based RNG on small hand-worked distributions. Expected
// values are derived in the test from the definitions (HF / OpenAI semantics), never from the output.
import { describe, expect, it } from 'vitest';
import { expectClose } from '../helpers/close.ts';
import { Rng } from '../../src/model/rng.ts';
import {
  DEFAULT_SAMPLING,
  SamplingError,
  choose,
  process_logits,
  sample_step,
  uniform,
  type RowState,
  type SamplingSettings,
} from '../../src/model/sampler.ts';

const S = (o: Partial<SamplingSettings> = {}): SamplingSettings => ({ ...DEFAULT_SAMPLING, ...o });
const row = (completion: number[] = [], prompt: number[] = []): RowState => ({ prompt_ids: prompt, completion_ids: completion });
/** Normalises non-negative weights into probabilities. */
const norm = (w: number[]) => {
  const t = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / t);
};
// Pure float64 arithmetic on a handful of numbers: a few ulps.
const tight = { atol: 1e-12, rtol: 1e-12 };

describe('process_logits', () => {
  it('with nothing enabled is the softmax of the logits', () => {
    // logits = log(w) ⇒ softmax = w / Σw exactly.
    const { probs, logprobs } = process_logits([1, 2, 3, 4].map(Math.log), [row()], S());
    expectClose(probs, [0.1, 0.2, 0.3, 0.4], { ...tight, label: 'probs' });
    expectClose(logprobs, [0.1, 0.2, 0.3, 0.4].map(Math.log), { ...tight, label: 'logprobs' });
  });

  it('temperature divides the logits', () => {
    // log(w) / 0.5 = log(w²).
    const { probs } = process_logits([1, 2, 3, 4].map(Math.log), [row()], S({ temperature: 0.5 }));
    expectClose(probs, norm([1, 4, 9, 16]), { ...tight, label: 'T=0.5' });
  });

  it('top-k keeps the k largest, ties with the k-th included, and ignores k ≥ V', () => {
    const p2 = process_logits([1, 2, 3, 4].map(Math.log), [row()], S({ top_k: 2 })).probs;
    expectClose(p2, [0, 0, 3 / 7, 4 / 7], { ...tight, label: 'k=2' });
    // Three tokens tie for the 2nd largest value: HF removes only scores < kth, so all three stay.
    const tie = process_logits([5, 1, 5, 5], [row()], S({ top_k: 2 })).probs;
    expectClose(tie, [1 / 3, 0, 1 / 3, 1 / 3], { ...tight, label: 'ties' });
    const big = process_logits([1, 2, 3, 4].map(Math.log), [row()], S({ top_k: 9 })).probs;
    expectClose(big, [0.1, 0.2, 0.3, 0.4], { ...tight, label: 'k>V' });
    // Only one finite logit: the k-th largest is −inf, nothing finite is removed.
    const inf = process_logits([-Infinity, 0.3, -Infinity], [row()], S({ top_k: 2 })).probs;
    expect(Array.from(inf)).toEqual([0, 1, 0]);
  });

  it('top-p keeps the smallest most-likely set reaching top_p', () => {
    // Sorted: 0.4, 0.3, 0.2, 0.1. Mass before 0.3 is 0.4 < 0.5 ⇒ kept; before 0.2 is 0.7 ⇒ cut.
    const p = process_logits([1, 2, 3, 4].map(Math.log), [row()], S({ top_p: 0.5 })).probs;
    expectClose(p, [0, 0, 3 / 7, 4 / 7], { ...tight, label: 'p=0.5' });
    // 0.75: 0.4 + 0.3 = 0.7 < 0.75, so 0.2 is also needed.
    const p75 = process_logits([1, 2, 3, 4].map(Math.log), [row()], S({ top_p: 0.75 })).probs;
    expectClose(p75, [0, 2 / 9, 3 / 9, 4 / 9], { ...tight, label: 'p=0.75' });
    // Four exact quarters (exp(0) = 1, 1/4 exact): mass exactly 0.5 after two tokens ⇒ stop there;
    // ties go to the lower id.
    const q = process_logits([0, 0, 0, 0], [row()], S({ top_p: 0.5 })).probs;
    expectClose(q, [0.5, 0.5, 0, 0], { ...tight, label: 'quarters' });
    // A tiny top_p still keeps one token (the most likely).
    const one = process_logits([0.2, 1.5, -3, 1.4], [row()], S({ top_p: 1e-9 })).probs;
    expect(Array.from(one)).toEqual([0, 1, 0, 0]);
  });

  it('top-k and top-p keep exactly the brute-force sets on large rows with many ties', () => {
    // Brute force straight from the definitions: sort (value desc, id asc), keep the first k (plus
    // ties with the k-th value) / the prefix whose preceding mass is < top_p.
    const rng = new Rng(5);
    const V = 3001;
    for (let trial = 0; trial < 12; trial++) {
      // Quantised logits (steps of 0.25) make ties common; a few −inf.
      const x = Array.from({ length: V }, () => (rng.next() < 0.01 ? -Infinity : Math.round(rng.normal() * (2 + trial) * 4) / 4));
      const order = x.map((_, i) => i).filter((i) => x[i] > -Infinity).sort((a, b) => x[b] - x[a] || a - b);
      const k = 1 + rng.int(0, 60);
      const kth = x[order[k - 1]];
      const keptK = x.map((v) => v >= kth && v > -Infinity);
      const pk = process_logits(x, [row()], S({ top_k: k })).probs;
      expect(Array.from(pk, (q) => q > 0), `top_k ${k} trial ${trial}`).toEqual(keptK);

      const topP = [0.3, 0.9, 0.99, 0.5][trial % 4];
      const m = x[order[0]];
      const w = x.map((v) => Math.exp(v - m));
      const total = w.reduce((a, b) => a + b, 0);
      const keptP = new Array<boolean>(V).fill(false);
      let before = 0;
      for (const i of order) {
        if (before >= topP) break;
        keptP[i] = true;
        before += w[i] / total;
      }
      const pp = process_logits(x, [row()], S({ top_p: topP })).probs;
      expect(Array.from(pp, (q) => q > 0), `top_p ${topP} trial ${trial}`).toEqual(keptP);
    }
  });

  it('applies temperature, then top-k, then top-p (HF warper order)', () => {
    // logits log([1,2,3,4,6]) at T = 0.5 → weights [1,4,9,16,36]; top-k 4 drops the 1; over
    // [4,9,16,36] (Σ 65) the mass before 16 is 36/65 ≈ 0.554, before 9 it is 52/65 = 0.8, before 4 it
    // is 61/65 ≈ 0.938. top_p 0.81 keeps 36, 16, 9; top_p 0.7 keeps 36, 16.
    const w = [1, 2, 3, 4, 6].map(Math.log);
    const p = process_logits(w, [row()], S({ temperature: 0.5, top_k: 4, top_p: 0.81 })).probs;
    expectClose(p, [0, 0, 9 / 61, 16 / 61, 36 / 61], { ...tight, label: 'combined' });
    const p2 = process_logits(w, [row()], S({ temperature: 0.5, top_k: 4, top_p: 0.7 })).probs;
    expectClose(p2, [0, 0, 0, 16 / 52, 36 / 52], { ...tight, label: 'combined p=0.7' });
  });

  it('min-p removes tokens below min_p times the top probability, after top-p (HF MinPLogitsWarper)', () => {
    // Weights [1, 2, 4, 10, 20]: min_p 0.15 removes p < 0.15·p_max, i.e. weights < 3 → keeps 4, 10, 20.
    const w = [1, 2, 4, 10, 20].map(Math.log);
    const p = process_logits(w, [row()], S({ min_p: 0.15 })).probs;
    expectClose(p, [0, 0, 4 / 34, 10 / 34, 20 / 34], { ...tight, label: 'min_p 0.15' });
    // top_p 0.9: the mass before 4 is 30/37 ≈ 0.81 < 0.9, before 2 it is 34/37 ≈ 0.92, so 4, 10, 20 stay;
    // then min_p 0.3 (weights < 6 go) leaves 10, 20. min_p 1 keeps only the top token.
    expectClose(process_logits(w, [row()], S({ top_p: 0.9, min_p: 0.3 })).probs, [0, 0, 0, 10 / 30, 20 / 30], { ...tight, label: 'top_p then min_p' });
    expectClose(process_logits(w, [row()], S({ min_p: 1 })).probs, [0, 0, 0, 0, 1], { ...tight, label: 'min_p 1' });
    expect(() => process_logits(w, [row()], S({ min_p: 1.5 }))).toThrow(/min_p/);
  });

  it('repetition penalty divides positive and multiplies negative logits of seen tokens (once each)', () => {
    const x = [2, -2, 1, 0.5];
    // Token 1 seen twice: HF gathers/scatters, so it is penalised once, not twice.
    const { logprobs } = process_logits(x, [row([0, 1, 1])], S({ repetition_penalty: 2 }));
    const z = [1, -4, 1, 0.5];
    const lse = Math.log(z.reduce((a, v) => a + Math.exp(v), 0));
    expectClose(logprobs, z.map((v) => v - lse), { ...tight, label: 'rep' });
  });

  it('presence and frequency penalties subtract per seen token and per occurrence', () => {
    const x = [0.3, 1.1, -0.4, 2];
    const { logprobs } = process_logits(x, [row([2, 2, 0])], S({ presence_penalty: 1, frequency_penalty: 0.5 }));
    const z = [0.3 - 0.5 - 1, 1.1, -0.4 - 2 * 0.5 - 1, 2];
    const lse = Math.log(z.reduce((a, v) => a + Math.exp(v), 0));
    expectClose(logprobs, z.map((v) => v - lse), { ...tight, label: 'pres/freq' });
  });

  it("penalty_scope 'completion' ignores the prompt; 'prompt+completion' reproduces seed 002", () => {
    // Vocabulary: 0 = EOS, 1 = "the" (20 times in the prompt), 2 = "cat". Equal logits.
    const prompt = Array<number>(20).fill(1);
    const s = { presence_penalty: 0.3, frequency_penalty: 0.2 };
    const comp = process_logits([0, 0, 0], [row([], prompt)], S({ ...s })).probs;
    expectClose(comp, [1 / 3, 1 / 3, 1 / 3], { ...tight, label: 'completion scope' });
    const bug = process_logits([0, 0, 0], [row([], prompt)], S({ ...s, penalty_scope: 'prompt+completion' })).probs;
    // "the" loses 20·0.2 + 0.3 = 4.3 nats; EOS, never in the prompt, is not touched.
    const w = [1, Math.exp(-4.3), 1];
    expectClose(bug, norm(w), { ...tight, label: 'prompt+completion scope' });
    // Completion tokens count in both scopes.
    const both = process_logits([0, 0, 0], [row([2], prompt)], S({ ...s })).probs;
    expectClose(both, norm([1, 1, Math.exp(-0.5)]), { ...tight, label: 'completion tokens' });
  });

  it('min_new_tokens sets every EOS id to −inf until enough tokens were generated', () => {
    const x = [0.5, 0.5, 0.5, 0.5];
    const s = S({ min_new_tokens: 2, eos_token_ids: [1, 3] });
    const early = process_logits(x, [row([0])], s).probs;
    expectClose(early, [0.5, 0, 0.5, 0], { ...tight, label: 'early' });
    const late = process_logits(x, [row([0, 2])], s).probs;
    expectClose(late, [0.25, 0.25, 0.25, 0.25], { ...tight, label: 'late' });
    // Also under greedy: EOS is the argmax but masked.
    const g = sample_step([0, 9, 1, 0], [row([])], S({ min_new_tokens: 1, eos_token_ids: [1], temperature: 0 }), 0, 0);
    expect(g.tokens[0]).toBe(2);
  });

  it('rows are processed independently', () => {
    const x = [0, 0, 0, /* row 1 */ 1, 2, 3];
    const { probs } = process_logits(x, [row([0]), row([])], S({ presence_penalty: Math.log(2) }));
    // Row 0: token 0 weight halved. Row 1: untouched softmax of [1,2,3].
    const e = [1, 2, 3].map(Math.exp);
    expectClose(probs, [...norm([0.5, 1, 1]), ...norm(e)], { ...tight, label: 'rows' });
  });

  it('greedy skips the warpers and records the temperature-1 log-prob of the penalised logits', () => {
    const x = [1, 3, 3, 2];
    // temperature 0 ⇒ greedy: top_k / top_p are not applied; ties go to the lowest id.
    const r = sample_step(x, [row()], S({ temperature: 0, top_k: 1, top_p: 0.1 }), 123, 0);
    expect(r.tokens[0]).toBe(1);
    const lse = Math.log(x.reduce((a, v) => a + Math.exp(v), 0));
    expect(r.logps[0]).toBeCloseTo(3 - lse, 12);
    const d = sample_step(x, [row()], S({ do_sample: false, temperature: 0.7 }), 123, 0);
    expect(d.tokens[0]).toBe(1);
    expect(d.logps[0]).toBeCloseTo(3 - lse, 12);
  });

  it('a subset of rows with their row ids draws what those rows draw in the full batch', () => {
    const rng = new Rng(3);
    const x = rng.f32(5 * 17, 2); // (5, 17)
    const states = [0, 1, 2, 3, 4].map((b) => row([b, 2 * b]));
    const s = S({ temperature: 0.8, top_p: 0.9, presence_penalty: 0.4 });
    const full = sample_step(x, states, s, 77, 4);
    const sub = sample_step(new Float32Array([...x.subarray(17, 34), ...x.subarray(68, 85)]), [states[1], states[4]], s, 77, 4, [1, 4]);
    expect(Array.from(sub.tokens)).toEqual([full.tokens[1], full.tokens[4]]);
    expect(Array.from(sub.logps)).toEqual([full.logps[1], full.logps[4]]);
  });

  it('rejects bad input with a message naming the field, row and token', () => {
    expect(() => process_logits([0, NaN, 0], [row()], S())).toThrow(/row 0: logit of token 1 is NaN/);
    expect(() => process_logits([0, 1, 0, 0, 0, Infinity], [row(), row()], S())).toThrow(/row 1: logit of token 2/);
    expect(() => process_logits([0, 0], [row()], S({ top_p: 0 }))).toThrow(/top_p/);
    expect(() => process_logits([0, 0], [row()], S({ temperature: -1 }))).toThrow(/temperature/);
    expect(() => process_logits([0, 0], [row()], S({ eos_token_ids: [2] }))).toThrow(/eos_token_ids/);
    expect(() => process_logits([0, 0], [row([5])], S({ presence_penalty: 1 }))).toThrow(/row 0: completion_ids\[0\] = 5/);
    // Only EOS is finite and min_new_tokens masks it: no distribution left.
    expect(() => process_logits([-Infinity, 0], [row()], S({ min_new_tokens: 1, eos_token_ids: [1] }))).toThrow(SamplingError);
  });
});

describe('choose', () => {
  const p = process_logits([1, 2, 3, 4].map(Math.log), [row()], S());
  it('inverts the CDF in token order and never picks a zero-probability token', () => {
    // CDF: 0.1, 0.3, 0.6, 1.0
    expect([0, 0.05, 0.15, 0.35, 0.65, 0.999999].map((u) => choose(p, 0, 4, false, u))).toEqual([0, 0, 1, 2, 3, 3]);
    const z = process_logits([-Infinity, 0, -Infinity, 0], [row()], S());
    expect(choose(z, 0, 4, false, 0)).toBe(1);
    expect(choose(z, 0, 4, false, 0.9999999999)).toBe(3);
  });
  it('samples with the processed frequencies', () => {
    // 20000 draws from [0.1, 0.2, 0.3, 0.4]: each count within 5 binomial standard deviations.
    const n = 20000;
    const counts = [0, 0, 0, 0];
    for (let t = 0; t < n; t++) counts[choose(p, 0, 4, false, uniform(42, 3, t))]++;
    [0.1, 0.2, 0.3, 0.4].forEach((q, v) => expect(Math.abs(counts[v] - n * q)).toBeLessThan(5 * Math.sqrt(n * q * (1 - q))));
  });
});

describe('uniform (counter-based RNG)', () => {
  it('is a pure function of (seed, row, step) in [0, 1)', () => {
    expect(uniform(7, 2, 11)).toBe(uniform(7, 2, 11));
    expect(uniform(7, 2, 11)).not.toBe(uniform(8, 2, 11));
    expect(uniform(7, 2, 11)).not.toBe(uniform(7, 3, 11));
    expect(uniform(7, 2, 11)).not.toBe(uniform(7, 2, 12));
    // Seeds above 2^32 use their high bits too.
    expect(uniform(2 ** 40 + 7, 0, 0)).not.toBe(uniform(7, 0, 0));
  });
  it('is uniform: 16-bin chi-square over 32000 draws across rows and steps', () => {
    const bins = new Array(16).fill(0);
    let n = 0;
    for (let r = 0; r < 8; r++)
      for (let t = 0; t < 4000; t++) {
        const u = uniform(1234, r, t);
        expect(u >= 0 && u < 1).toBe(true);
        bins[Math.floor(u * 16)]++;
        n++;
      }
    const e = n / 16;
    const chi2 = bins.reduce((a, c) => a + ((c - e) * (c - e)) / e, 0);
    // 15 degrees of freedom: P(chi2 > 37.7) ≈ 0.001.
    expect(chi2).toBeLessThan(37.7);
  });
});
