// Float64 twin of shaders/gelu_{forward,backward}.wgsl: gelu_new = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated as the identical x * sigmoid(2u): even in float64, 1 + tanh(u) cancels to 0 below x ~ -6
// while the true value is still ~1e-16 (0.5 (1 + tanh(u)) = sigmoid(2u) exactly).
type Arr = ArrayLike<number>;

const K = Math.sqrt(2 / Math.PI);
const A = 0.044715;

/** sigmoid(2u) and its derivative factor sigmoid(2u)·(1 − sigmoid(2u)), without cancellation. */
function parts(x: number) {
  const u = K * (x + A * x ** 3);
  const e = Math.exp(-2 * Math.abs(u));
  const s = (u >= 0 ? 1 : e) / (1 + e);
  return { s, ds: e / (1 + e) ** 2, du: K * (1 + 3 * A * x * x) };
}

export function gelu_forward(inp: Arr): Float64Array {
  return Float64Array.from(inp, (x) => x * parts(x).s);
}

/** The two terms of d gelu / dx = s + 2 x u' s (1 - s) (tests use their magnitudes to scale tolerances). */
export function gelu_grad_terms(x: number): [number, number] {
  const { s, ds, du } = parts(x);
  return [s, ds === 0 ? 0 : 2 * x * du * ds];
}

export function gelu_backward(inp: Arr, dout: Arr): Float64Array {
  return Float64Array.from(inp, (x, i) => {
    const [a, b] = gelu_grad_terms(x);
    return dout[i] * (a + b);
  });
}
