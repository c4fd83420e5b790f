// The WGSL loader (src/gpu/wgsl.ts: //#include of shaders/common/ pieces) and the layouts read off the
// WGSL (src/gpu/layout.ts: the bindings an entry point statically uses, params uniform with a dynamic
// offset). Every kernel under shaders/ must compile through the Node loader with its includes resolved.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readShader as bundledShader } from '../../src/gpu/browser.ts';
import { entryBindings } from '../../src/gpu/layout.ts';
import { resolveIncludes } from '../../src/gpu/wgsl.ts';
import { testGpu } from '../helpers/gpu.ts';

const SHADERS = join(import.meta.dirname, '..', '..', 'shaders');

describe('//#include', () => {
  const files: Record<string, string> = {
    k: '// kernel\n//#include "common/a.wgsl"\n//#include "common/b.wgsl"\nfn main() {}\n',
    'common/a': 'fn a() {}\n',
    'common/b': '//#include "common/a.wgsl"\nfn b() { a(); }\n',
    cyc: '//#include "common/c.wgsl"\n',
    'common/c': '//#include "cyc.wgsl"\n',
  };
  const src = (name: string) => {
    if (!(name in files)) throw new Error(`unknown shader "${name}"`);
    return files[name];
  };

  it('inserts each piece once, in place, recursively', () => {
    const out = resolveIncludes('k', src);
    expect(out.match(/fn a\(\)/g)).toHaveLength(1);
    expect(out.indexOf('fn a()')).toBeLessThan(out.indexOf('fn b()'));
    expect(out.indexOf('fn b()')).toBeLessThan(out.indexOf('fn main()'));
    expect(out).not.toMatch(/^\/\/#include/m);
  });

  it('rejects a cycle, naming it', () => {
    expect(() => resolveIncludes('cyc', src)).toThrow(/include cycle cyc → common\/c → cyc/);
  });

  it('fails on a missing piece with the loader error', () => {
    expect(() => resolveIncludes('x', (n) => (n === 'x' ? '//#include "common/none.wgsl"\n' : src(n)))).toThrow(/common\/none/);
  });
});

describe('bindings an entry point uses', () => {
  it('follows calls and ignores member names; entry points of one module differ', () => {
    const code = readFileSync(join(SHADERS, 'sumsq_forward.wgsl'), 'utf8');
    const read = (n: string) => readFileSync(join(SHADERS, `${n}.wgsl`), 'utf8');
    const full = resolveIncludes('sumsq_forward', read);
    expect(entryBindings(full, 'main')).toEqual(['r', 'r', 'r', 'r', 'r', 'r', 'w', 'r', 'u']);
    expect(entryBindings(full, 'finish')).toEqual(['r', 'r', 'w', 'u']);
    expect(() => entryBindings(code, 'nope')).toThrow(/entry point "nope"/);
    const rms = resolveIncludes('rmsnorm_backward', read);
    expect(entryBindings(rms, 'main')).toEqual(['r', 'r', 'r', 'r', 'w', 'u']);
    expect(entryBindings(rms, 'dweight')).toEqual(['r', 'r', 'r', 'w', 'u']);
  });

  it('a helper function that reaches a binding counts', () => {
    const code = `
      @group(0) @binding(0) var<storage, read> a: array<f32>;
      @group(0) @binding(1) var<storage, read_write> b: array<f32>;
      @group(0) @binding(2) var<uniform> p: P;
      fn get(i: u32) -> f32 { return a[i]; } // a.b is not b
      @compute @workgroup_size(1) fn main() { b[0] = get(0u) + p.x; }
      @compute @workgroup_size(1) fn other() { let q = p.b; }`;
    expect(entryBindings(code, 'main')).toEqual(['r', 'w', 'u']);
    expect(entryBindings(code, 'other')).toEqual(['', '', 'u']);
  });
});

describe('the browser bundle', () => {
  it('holds the shared pieces under the names the kernels include them by, identical to the files', () => {
    const read = (n: string) => readFileSync(join(SHADERS, `${n}.wgsl`), 'utf8');
    for (const name of ['rmsnorm_backward', 'layernorm_forward', 'gelu_backward', 'attention_forward']) {
      expect(resolveIncludes(name, bundledShader)).toBe(resolveIncludes(name, read));
    }
    expect(bundledShader('common/reduce')).toBe(read('common/reduce'));
  });
});

describe('every kernel compiles through the Node loader', () => {
  it('shaders/*.wgsl with their includes', async () => {
    const gpu = await testGpu();
    const names = readdirSync(SHADERS)
      .filter((f) => f.endsWith('.wgsl'))
      .map((f) => f.slice(0, -5));
    expect(names.length).toBeGreaterThan(20);
    const read = (n: string) => readFileSync(join(SHADERS, `${n}.wgsl`), 'utf8');
    const errors: string[] = [];
    for (const name of names) {
      const code = resolveIncludes(name, read);
      const info = await gpu.device.createShaderModule({ label: name, code }).getCompilationInfo();
      for (const m of info.messages) if (m.type === 'error') errors.push(`${name}:${m.lineNum}: ${m.message}`);
    }
    expect(errors).toEqual([]);
  });
});
