// Bind-group layouts read off the WGSL itself, so the params uniform can be bound with a dynamic offset
// (WebGPU's `layout: 'auto'` never sets hasDynamicOffset) while the shaders keep the one convention they
// all follow: @group(0) storage bindings 0..n-1, then the params uniform. A shader may have several entry
// points that declare different variables at the same binding (sumsq_forward's main / finish), so the
// layout is that of the variables an entry point statically uses: its body plus every function it calls,
// transitively — the same rule WebGPU applies to build an 'auto' layout.

/** One binding's kind: read-only storage, read-write storage, or the (dynamic-offset) params uniform. */
export type BindingKind = 'r' | 'w' | 'u';

interface GlobalVar {
  binding: number;
  kind: BindingKind;
  name: string;
}

const stripComments = (code: string) => code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');

/** Top-level functions: name → text from its name to its closing brace (parameters and body). */
function functions(code: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /\bfn\s+(\w+)\s*\(/g;
  for (let m = re.exec(code); m; m = re.exec(code)) {
    let i = code.indexOf('{', m.index);
    let depth = 0;
    const start = m.index;
    for (; i < code.length; i++) {
      if (code[i] === '{') depth++;
      else if (code[i] === '}' && --depth === 0) break;
    }
    out.set(m[1], code.slice(start, i + 1));
    re.lastIndex = i + 1;
  }
  return out;
}

/**
 * The @group(0) bindings `entryPoint` of this WGSL uses, as a kind per binding index 0..max ('' for a
 * binding it does not use). Throws if two variables it uses share a binding (the shader is wrong).
 */
export function entryBindings(wgsl: string, entryPoint: string): BindingKind[] {
  const code = stripComments(wgsl);
  const vars: GlobalVar[] = [];
  const declRe = /@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var\s*<\s*(storage|uniform)\s*(?:,\s*(read_write|read)\s*)?>\s*(\w+)/g;
  for (let m = declRe.exec(code); m; m = declRe.exec(code)) {
    vars.push({ binding: Number(m[1]), kind: m[2] === 'uniform' ? 'u' : m[3] === 'read_write' ? 'w' : 'r', name: m[4] });
  }
  const fns = functions(code);
  if (!fns.has(entryPoint)) throw new Error(`entry point "${entryPoint}" not found`);
  // Every identifier reachable from the entry point.
  const used = new Set<string>();
  const todo = [entryPoint];
  while (todo.length) {
    const f = todo.pop()!;
    // Skip member names (`p.n`): a field may share a name with another entry point's variable.
    for (const [, member, id] of fns.get(f)!.matchAll(/(\.\s*)?\b([A-Za-z_]\w*)\b/g)) {
      if (member || used.has(id)) continue;
      used.add(id);
      if (fns.has(id) && id !== f) todo.push(id);
    }
  }
  const kinds: BindingKind[] = [];
  for (const v of vars) {
    if (!used.has(v.name)) continue;
    if (kinds[v.binding]) throw new Error(`entry point "${entryPoint}" uses two variables at @binding(${v.binding})`);
    kinds[v.binding] = v.kind;
  }
  return Array.from(kinds, (k) => k ?? ('' as BindingKind));
}

/** The layout entries for those kinds: the uniform takes a dynamic offset; unused indices are left out. */
export function layoutEntries(kinds: BindingKind[]): GPUBindGroupLayoutEntry[] {
  const entries: GPUBindGroupLayoutEntry[] = [];
  kinds.forEach((k, binding) => {
    if (!k) return;
    const type: GPUBufferBindingType = k === 'u' ? 'uniform' : k === 'w' ? 'storage' : 'read-only-storage';
    entries.push({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type, hasDynamicOffset: k === 'u' } });
  });
  return entries;
}
