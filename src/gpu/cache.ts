// Pipelines, bind-group layouts and bind groups, each created once per device. Pipelines are keyed by
// shader + entry point + override constants and get an explicit layout read off their WGSL (layout.ts)
// whose params uniform takes a dynamic offset; layouts are shared by every pipeline with the same binding
// kinds, and bind groups are keyed by layout + exact buffer windows. WGSL is loaded through the
// `//#include` resolver (wgsl.ts), so browser and Node see the same text. Each pipeline comes with its
// entry point's interface by name (layout.ts entryInterface), which the recorder holds every dispatch's
// named bindings and params to.
import { entryBindings, entryInterface, layoutEntries, type BindingKind, type KernelInterface } from './layout.ts';
import type { GpuStats } from './stats.ts';
import { resolveIncludes } from './wgsl.ts';

export type ShaderSources = (name: string) => string;
export type Constants = Record<string, number | boolean>;

const BIND_GROUP_CACHE = 4096;

export interface Journal {
  pipelines: string[];
  bindGroups: string[];
  modules: string[];
}

/** A compute pipeline, its layout's key (binding kinds) and the interface its launchers must match. */
export interface CachedPipeline {
  pipeline: GPUComputePipeline;
  layout: string;
  iface: KernelInterface;
}

/** A pipeline's key: shader, entry point and its own constants in `names`' order, every part length-prefixed (no two share a key). */
function pipelineKey(shader: string, entryPoint: string, constants: Constants, names: string[]): string {
  let key = `${shader.length}:${shader}${entryPoint.length}:${entryPoint}`;
  for (const k of names) key += `${k.length}:${k}=${Number(constants[k])},`;
  return key;
}

export class PipelineCache {
  private readonly modules = new Map<string, { module: GPUShaderModule; code: string }>();
  private readonly pipelines = new Map<string, CachedPipeline>();
  /** A launcher's constants in its own order → the pipeline's key (names sorted): the per-dispatch lookup skips the sort. */
  private readonly canonicalKeys = new Map<string, string>();
  private readonly layouts = new Map<string, { group: GPUBindGroupLayout; pipeline: GPUPipelineLayout }>();
  // Bind groups by layout + exact buffer windows: createBindGroup is the largest per-dispatch CPU cost
  // (10-25 µs on Dawn), and a step or decode loop binds the same buffers every time. The params uniform
  // does not vary the key: it is a window of a shared params page selected by a dynamic offset (see
  // Recorder). Buffer ids are never reused, so an entry of a destroyed buffer can never be hit again; the
  // cache is an LRU bounded at BIND_GROUP_CACHE entries.
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 1;
  /** While set, keys of pipelines / bind groups created are noted (a failed submit drops them: they may be invalid). */
  private journal: Journal | null = null;

  constructor(
    private readonly device: GPUDevice,
    private readonly sources: ShaderSources,
    private readonly stats: GpuStats,
  ) {}

  private module(shader: string): { module: GPUShaderModule; code: string } {
    let m = this.modules.get(shader);
    if (!m) {
      const code = resolveIncludes(shader, this.sources);
      m = { module: this.device.createShaderModule({ label: shader, code }), code };
      this.modules.set(shader, m);
      this.journal?.modules.push(shader);
    }
    return m;
  }

  /** The bind-group layout (and pipeline layout) for these binding kinds, shared by every pipeline with them. */
  private layout(kinds: string): { group: GPUBindGroupLayout; pipeline: GPUPipelineLayout } {
    let l = this.layouts.get(kinds);
    if (!l) {
      const group = this.device.createBindGroupLayout({ label: kinds, entries: layoutEntries(kinds.split(',') as BindingKind[]) });
      l = { group, pipeline: this.device.createPipelineLayout({ label: kinds, bindGroupLayouts: [group] }) };
      this.layouts.set(kinds, l);
    }
    return l;
  }

  /**
   * Cached compute pipeline for `shaders/<shader>.wgsl`, entry point and override constants, with an
   * explicit layout read off the WGSL (layout.ts) whose params uniform takes a dynamic offset; `layout`
   * is that layout's key (binding kinds), which bind groups are cached under, and `iface` the entry
   * point's storage variables and params fields by name.
   */
  pipeline(shader: string, constants: Constants = {}, entryPoint = 'main'): CachedPipeline {
    // Looked up for every dispatch: first by the constants in the launcher's own order (no sorting), then, the
    // first time that order is seen, by the canonical key (names sorted), so one pipeline serves both.
    const names = Object.keys(constants);
    const seen = pipelineKey(shader, entryPoint, constants, names);
    let key = this.canonicalKeys.get(seen);
    if (key === undefined) this.canonicalKeys.set(seen, (key = pipelineKey(shader, entryPoint, constants, names.sort())));
    let p = this.pipelines.get(key);
    if (!p) {
      names.sort();
      const c: Record<string, number> = {};
      for (const k of names) c[k] = Number(constants[k]);
      const { module, code } = this.module(shader);
      const layout = entryBindings(code, entryPoint).join(',');
      const iface = entryInterface(code, entryPoint);
      const label = `${shader}:${entryPoint}:${names.map((k) => `${k}=${c[k]}`).join(',')}`;
      const pipeline = this.device.createComputePipeline({ label, layout: this.layout(layout).pipeline, compute: { module, entryPoint, constants: c } });
      p = { pipeline, layout, iface };
      this.pipelines.set(key, p);
      this.journal?.pipelines.push(key);
    }
    return p;
  }

  get pipelineCount(): number {
    return this.pipelines.size;
  }

  /** A bind group of layout `layout` (a key from pipeline()) over these buffer windows, bindings 0.. in order; cached. */
  bindGroup(label: string, layout: string, resources: GPUBufferBinding[]): GPUBindGroup {
    let key = layout;
    for (const r of resources) {
      let id = this.bufferIds.get(r.buffer);
      if (id === undefined) this.bufferIds.set(r.buffer, (id = this.nextBufferId++));
      key += `|${id}:${r.offset ?? 0}:${r.size ?? ''}`;
    }
    let bg = this.bindGroups.get(key);
    if (bg) {
      this.stats.bindGroupHits++;
      this.bindGroups.delete(key); // move to the LRU's young end
    } else {
      this.stats.bindGroupMisses++;
      bg = this.device.createBindGroup({ label, layout: this.layout(layout).group, entries: resources.map((resource, binding) => ({ binding, resource })) });
      if (this.bindGroups.size >= BIND_GROUP_CACHE) this.bindGroups.delete(this.bindGroups.keys().next().value as string);
      this.journal?.bindGroups.push(key);
    }
    this.bindGroups.set(key, bg);
    return bg;
  }

  /**
   * Notes the pipelines, modules and bind groups created until endJournal(); forget() drops them again.
   * A failed submit forgets what it created, so an invalid object is not served from the cache and the
   * diagnosis re-creates it inside the failing kernel's own error scope.
   */
  beginJournal(): Journal {
    return (this.journal = { pipelines: [], bindGroups: [], modules: [] });
  }

  endJournal(): void {
    this.journal = null;
  }

  forget(j: Journal): void {
    for (const k of j.pipelines) this.pipelines.delete(k);
    for (const k of j.bindGroups) this.bindGroups.delete(k);
    for (const k of j.modules) this.modules.delete(k);
  }

}
