// Central finite differences, for checking each float64 twin's backward against its own forward:
// with L = Σ g ⊙ forward(x) (dot below), ∂L/∂x by differences must equal backward(g) at x.
/** ∂f/∂x[i] by a central difference with step h; x[i] is restored afterwards. */
export function centralDiff(f: () => number, x: Float64Array, i: number, h: number): number {
  const x0 = x[i];
  x[i] = x0 + h;
  const up = f();
  x[i] = x0 - h;
  const down = f();
  x[i] = x0;
  return (up - down) / (2 * h);
}

/** ∂f/∂x for every element of x; `h` is the step, or the step as a function of the element's value. */
export function fdGradient(f: () => number, x: Float64Array, h: number | ((v: number) => number)): Float64Array {
  return Float64Array.from(x, (v, i) => centralDiff(f, x, i, typeof h === 'number' ? h : h(v)));
}

/** Σ a ⊙ b. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
