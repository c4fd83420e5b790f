// Device acquisition shared by the browser and Node: pick an adapter (a real GPU first, then a
// software one), request its maximum buffer limits and every useful optional feature, and describe it.
import { Gpu, GpuError, type AdapterReport, type ShaderSources } from './context.ts';

/** Optional features we use when present (f16 logits storage, subgroup reductions, GPU timings). */
const WANTED_FEATURES: GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query'] as GPUFeatureName[];

/** Limits we raise to the adapter's maximum: big logits buffers and wide workgroups. */
const MAX_LIMITS = [
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupsPerDimension',
] as const;

const REPORTED_LIMITS = [...MAX_LIMITS, 'minStorageBufferOffsetAlignment', 'maxUniformBufferBindingSize'] as const;

export async function requestBestAdapter(gpu: GPU, options: GPURequestAdapterOptions[] = []): Promise<GPUAdapter> {
  const tries: GPURequestAdapterOptions[] = [...options, { powerPreference: 'high-performance' }, {}, { featureLevel: 'compatibility' } as GPURequestAdapterOptions];
  for (const opts of tries) {
    const a = await gpu.requestAdapter(opts);
    if (a) return a;
  }
  throw new GpuError('unsupported', 'requestAdapter', 'no WebGPU adapter available (no GPU driver, and no software adapter such as lavapipe or SwiftShader)');
}

export async function createGpu(adapter: GPUAdapter, backend: string, sources: ShaderSources): Promise<Gpu> {
  const requiredFeatures = WANTED_FEATURES.filter((f) => adapter.features.has(f));
  const requiredLimits: Record<string, number> = {};
  for (const k of MAX_LIMITS) {
    const v = (adapter.limits as unknown as Record<string, number>)[k];
    if (typeof v === 'number') requiredLimits[k] = v;
  }
  const device = await adapter.requestDevice({ label: 'grpo-studio', requiredFeatures, requiredLimits });
  const info = adapter.info;
  const limits: Record<string, number> = {};
  for (const k of REPORTED_LIMITS) limits[k] = (device.limits as unknown as Record<string, number>)[k];
  const report: AdapterReport = {
    vendor: info?.vendor ?? '',
    architecture: info?.architecture ?? '',
    device: info?.device ?? '',
    description: info?.description ?? '',
    backend,
    isFallback: Boolean((info as { isFallbackAdapter?: boolean })?.isFallbackAdapter),
    features: [...device.features].sort(),
    limits,
  };
  return new Gpu(device, report, sources);
}
