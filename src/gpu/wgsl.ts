// WGSL pieces shared by several kernels (shaders/common/*.wgsl: the workgroup tree reduction, the stable
// sigmoid / tanh-GELU, ...) in the spirit of llm.c's common.h. A kernel pulls one in with a line
//     //#include "common/reduce.wgsl"
// which the loader replaces by that file's text, recursively, each piece once per shader. It is plain
// text inclusion: no values are templated (tunables stay `override` constants), and a `//` line is still
// a comment to any WGSL tool that reads the kernel without the loader.

const INCLUDE = /^[ \t]*\/\/#include[ \t]+"([^"]+)\.wgsl"[ \t]*$/gm;

/** The WGSL of `shader` with every //#include resolved through `source` (names without `.wgsl`). */
export function resolveIncludes(shader: string, source: (name: string) => string): string {
  const seen = new Set<string>();
  const expand = (name: string, chain: string[]): string => {
    if (chain.includes(name)) throw new Error(`shader "${shader}": include cycle ${[...chain, name].join(' → ')}`);
    return source(name).replace(INCLUDE, (_, inc: string) => {
      if (seen.has(inc)) return `// (${inc}.wgsl already included)`;
      seen.add(inc);
      return expand(inc, [...chain, name]);
    });
  };
  return expand(shader, []);
}
