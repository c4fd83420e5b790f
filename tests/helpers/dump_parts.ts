// Small pieces the dump-building tests share: a config given as dotted paths nested the way trainers save it
// (verl's OmegaConf.to_container, OpenRLHF's hierarchized args), and (B, T) tensors for writeSafeTensors.

/** A dict of paths ("a.b.c") as the nested object they name. */
export function nest(flat: Record<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [path, v] of Object.entries(flat)) {
    const parts = path.split('.');
    let node = root;
    for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1]] = v;
  }
  return root;
}

export const i32 = (rows: number[][]) => ({ dtype: 'I32' as const, shape: [rows.length, rows[0].length], data: Int32Array.from(rows.flat()) });
export const f32 = (rows: number[][]) => ({ dtype: 'F32' as const, shape: [rows.length, rows[0].length], data: Float32Array.from(rows.flat()) });
