// Float64 twin of shaders/silu_gate_{forward,backward}.wgsl: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
type Arr = ArrayLike<number>;

const sigmoid = (g: number) => 1 / (1 + Math.exp(-g));

export function silu_gate_forward(gate: Arr, up: Arr): Float64Array {
  return Float64Array.from(gate, (g, i) => g * sigmoid(g) * up[i]);
}

export function silu_gate_backward(dout: Arr, gate: Arr, up: Arr) {
  const dgate = new Float64Array(gate.length);
  const dup = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) {
    const s = sigmoid(gate[i]);
    dup[i] = dout[i] * gate[i] * s;
    dgate[i] = dout[i] * up[i] * s * (1 + gate[i] * (1 - s));
  }
  return { dgate, dup };
}
