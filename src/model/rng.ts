// A seeded sequential RNG (mulberry32 uniforms, Box-Muller normals) for weight initialisation, data
// order and random test inputs: the default model's training (scripts/train-default.ts) and every
// random test replay exactly from their seed. Sampling does not use it: the sampler's counter-based
// `uniform(seed, row, step)` (src/model/sampler.ts) must replay any step without the ones before it.
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** Standard normal (Box-Muller, two uniforms per draw). */
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }
  /** n normals times `scale`, rounded to f32. */
  f32(n: number, scale = 1): Float32Array {
    return Float32Array.from({ length: n }, () => this.normal() * scale);
  }
}
