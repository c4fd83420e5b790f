// Bind-group layouts read off the WGSL itself, so the params uniform can be bound with a dynamic offset
// (WebGPU's `layout: 'auto'` never sets hasDynamicOffset) while the shaders keep the one convention they
// all follow: @group(0) storage bindings 0..n-1, then the params uniform. A shader may have several entry
// points that declare different variables at the same binding (sumsq_forward's main / finish), so the
// layout is that of the variables an entry point statically uses: its body plus every function it calls,
// transitively — the same rule WebGPU applies to build an 'auto' layout.
// The same reading gives an entry point's interface by name (its storage variables, its params struct's
// fields), which bindByName holds a launcher's named buffers and params to when the pipeline is built, as
// a C compiler holds a call to its kernel's signature: a misspelt, missing or extra binding, or params
// out of the struct's order, is refused naming the kernel, the binding and the shader file, instead of
// binding the wrong buffer at the right index.

/** One binding's kind: read-only storage, read-write storage, or the (dynamic-offset) params uniform. */
export type BindingKind = 'r' | 'w' | 'u';

interface GlobalVar {
  binding: number;
  kind: BindingKind;
  name: string;
  type: string;
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

/** The @group(0) variables `entryPoint` uses, by binding index (holes where it uses none). */
function usedVars(code: string, entryPoint: string): GlobalVar[] {
  const vars: GlobalVar[] = [];
  const declRe = /@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var\s*<\s*(storage|uniform)\s*(?:,\s*(read_write|read)\s*)?>\s*(\w+)\s*:\s*([^;]+?)\s*;/g;
  for (let m = declRe.exec(code); m; m = declRe.exec(code)) {
    vars.push({ binding: Number(m[1]), kind: m[2] === 'uniform' ? 'u' : m[3] === 'read_write' ? 'w' : 'r', name: m[4], type: m[5] });
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
  const byBinding: GlobalVar[] = [];
  for (const v of vars) {
    if (!used.has(v.name)) continue;
    if (byBinding[v.binding]) throw new Error(`entry point "${entryPoint}" uses two variables at @binding(${v.binding})`);
    byBinding[v.binding] = v;
  }
  return byBinding;
}

/**
 * The @group(0) bindings `entryPoint` of this WGSL uses, as a kind per binding index 0..max ('' for a
 * binding it does not use). Throws if two variables it uses share a binding (the shader is wrong).
 */
export function entryBindings(wgsl: string, entryPoint: string): BindingKind[] {
  return Array.from(usedVars(stripComments(wgsl), entryPoint), (v) => v?.kind ?? ('' as BindingKind));
}

/** The scalar types a params word can hold (packed as 4 bytes each, in order). */
export type ParamType = 'u32' | 'i32' | 'f32';
/** One params word as a launcher writes it: the struct field's name, its type, its value. */
export type ParamWord = [name: string, type: ParamType, value: number];

/** What a launcher must give an entry point, read off the WGSL. */
export interface KernelInterface {
  /** Names of the storage variables at @binding(0..n-1), in binding order. */
  storage: string[];
  /** The params uniform's struct fields in order (at @binding(n)); null when the entry point takes none. */
  params: { name: string; type: ParamType }[] | null;
}

/**
 * The interface of `entryPoint`: its storage variables and its params struct. Holds the shaders' one
 * convention (storage at 0..n-1, then at most one uniform, last) and params structs of 4-byte scalars
 * (what the recorder packs); a shader that breaks either is refused, naming the binding or field.
 */
export function entryInterface(wgsl: string, entryPoint: string): KernelInterface {
  const code = stripComments(wgsl);
  const vars = usedVars(code, entryPoint);
  const at = (i: number) => `entry point "${entryPoint}": @binding(${i})`;
  const storage: string[] = [];
  let params: KernelInterface['params'] = null;
  for (let i = 0; i < vars.length; i++) {
    const v = vars[i];
    if (!v) throw new Error(`${at(i)} is unused while a later binding is used: bindings must be 0..n-1`);
    if (params) throw new Error(`${at(i)} "${v.name}" follows the params uniform: the uniform must be the last binding`);
    if (v.kind !== 'u') {
      storage.push(v.name);
      continue;
    }
    const body = new RegExp(`\\bstruct\\s+${v.type}\\s*\\{([^}]*)\\}`).exec(code);
    if (!body) throw new Error(`${at(i)} "${v.name}": no struct ${v.type} in the shader`);
    params = body[1]
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean)
      .map((f) => {
        const [name, type] = f.split(':').map((x) => x.trim());
        if (type !== 'u32' && type !== 'i32' && type !== 'f32') throw new Error(`${at(i)}: struct ${v.type} field "${f}" is not a u32, i32 or f32`);
        return { name, type };
      });
  }
  return { storage, params };
}

/**
 * A launcher's named buffers in the shader's binding order, after checking them by name against the
 * entry point's interface: every name the launcher passes is a storage variable the entry point uses,
 * and every one it uses is given; the params words carry the struct's field names and types in order
 * (trailing `_` padding fields may be left out: packing zero-fills them). The caller adds the kernel and
 * the shader file to the message.
 */
export function bindByName<T>(iface: KernelInterface, bindings: Record<string, T>, params: ParamWord[] | undefined): T[] {
  // Every dispatch comes here (its CPU cost is per dispatch): first a check that allocates only the result, then,
  // when it fails, the rules one by one for the message.
  const bound = matched(iface, bindings, params);
  if (bound) return bound;
  const unknown = Object.keys(bindings).find((name) => !iface.storage.includes(name));
  if (unknown !== undefined) throw new Error(`binding "${unknown}" is not a storage variable of the entry point (it binds ${iface.storage.join(', ')})`);
  const missing = iface.storage.find((name) => !given(bindings, name));
  if (missing !== undefined) throw new Error(`binding "${missing}" is not given (given: ${Object.keys(bindings).join(', ') || 'none'})`);
  const fields = iface.params ?? [];
  if (params && !iface.params) throw new Error(`the entry point takes no params uniform, the launcher writes ${params.length} words`);
  if (!params && iface.params) throw new Error(`params (${fields.map((f) => f.name).join(', ')}) are not written`);
  for (let i = 0; i < (params?.length ?? 0); i++) {
    if (!params![i]) throw new Error(`params word ${i} is missing (a hole in the launcher's params list)`);
    const [name, type] = params![i];
    const f = fields[i];
    if (!f) throw new Error(`params word ${i} "${name}" is past the end of the params struct (${fields.length} fields)`);
    if (f.name !== name || f.type !== type) throw new Error(`params word ${i} is "${name}: ${type}", the params struct has "${f.name}: ${f.type}" there`);
  }
  const unset = fields.slice(params?.length ?? 0).find((f) => !f.name.startsWith('_'));
  if (unset) throw new Error(`params field "${unset.name}" is not written`);
  throw new Error('the bindings do not match the entry point'); // not reached: matched() and the rules above agree
}

/** A binding is given as an own enumerable property (what Object.keys lists). */
const given = (bindings: object, name: string) => Object.prototype.propertyIsEnumerable.call(bindings, name);

/** bindByName's rules as one test: the storage bindings in binding order, or null when any rule fails. */
function matched<T>(iface: KernelInterface, bindings: Record<string, T>, params: ParamWord[] | undefined): T[] | null {
  const { storage, params: fields } = iface;
  let count = 0;
  for (const name in bindings) if (Object.hasOwn(bindings, name)) count++;
  if (count !== storage.length) return null;
  const out: T[] = new Array(storage.length);
  for (let i = 0; i < storage.length; i++) {
    if (!given(bindings, storage[i])) return null;
    out[i] = bindings[storage[i]];
  }
  if (!params || !fields) return !params && !fields ? out : null;
  if (params.length > fields.length) return null;
  for (let i = 0; i < params.length; i++) {
    const w = params[i];
    if (!w || w[0] !== fields[i].name || w[1] !== fields[i].type) return null;
  }
  for (let i = params.length; i < fields.length; i++) if (!fields[i].name.startsWith('_')) return null;
  return out;
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
