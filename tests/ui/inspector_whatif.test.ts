// The token inspector's what-if values (issue 24): with a what-if on, a completion token shows its weight,
// loss, ∂loss/∂logp and loss contribution under the update's settings and under the what-if's, read from
// the (B, C) arrays at that token — planted distinct values per side and per position, so a wrong index,
// side or term reads a different number; none without a what-if.
import { describe, expect, it } from 'vitest';
import type { WhatIfResult, WhatIfSide } from '../../src/bridge/protocol.ts';
import type { RunResults } from '../../src/store/session.ts';
import { whatIfToken } from '../../src/ui/grid/heat.ts';

const [B, C] = [2, 3];
// value = side·1000 + term·100 + b·10 + j: every (side, term, b, j) its own number.
const plant = (side: number, term: number) => Float32Array.from({ length: B * C }, (_, i) => side * 1000 + term * 100 + Math.floor(i / C) * 10 + (i % C));
const side = (s: number): WhatIfSide => ({ terms: { token_weight: plant(s, 1), per_token_loss: plant(s, 2), dlogp: plant(s, 3) } as unknown as WhatIfSide['terms'], advantages: new Float32Array(B) });
const run = { assemble: { padded: { B, C } } } as unknown as RunResults;
const w = { current: side(1), whatif: side(2) } as unknown as WhatIfResult;

describe('whatIfToken', () => {
  it("reads the token's weight, loss, gradient and loss contribution on both sides", () => {
    const t = whatIfToken(run, w, 1, 2)!;
    expect(t).toEqual([
      { term: 'weight', current: 1112, whatif: 2112 },
      { term: 'loss', current: 1212, whatif: 2212 },
      { term: '∂loss/∂logp', current: 1312, whatif: 2312 },
      { term: 'loss contribution', current: 1212 * 1112, whatif: 2212 * 2112 },
    ]);
  });

  it('has nothing without a what-if, and no value past the padded width', () => {
    expect(whatIfToken(run, null, 0, 0)).toBeNull();
    expect(whatIfToken(run, w, 0, C)!.every((t) => t.current === undefined && t.whatif === undefined)).toBe(true);
  });
});
