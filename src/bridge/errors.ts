// Maps any failure in the worker to the error categories the page shows (bad file, unsupported model,
// out of GPU memory, device lost, no WebGPU …), by error class name so it works across module copies.
import type { ErrorKind, WorkerErrorInfo } from './protocol.ts';

/** A failure already in the page's categories. */
export class StudioFailure extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'StudioFailure';
  }
}

/** A request the user stopped (an import): not an error to show. */
export class Cancelled extends Error {
  constructor() {
    super('cancelled');
    this.name = 'Cancelled';
  }
}

const BY_NAME: Record<string, ErrorKind> = {
  BatchFormatError: 'bad-file',
  InputError: 'bad-file',
  SafeTensorsError: 'bad-file',
  ModelLoadError: 'unsupported-model',
  TokenizerLoadError: 'unsupported-model',
  RewardDefinitionError: 'reward',
  GrpoLossError: 'settings',
  SettingsError: 'settings',
  OptimizerConfigError: 'settings',
  SamplingError: 'settings',
  TemplateError: 'settings',
};

/** What the user can do about a GPU failure, appended to its message. */
const HINTS: Partial<Record<ErrorKind, string>> = {
  'out-of-memory': ' — fewer prompts, a smaller G or fewer new tokens shrink the step (see the memory plan), or load a smaller model',
  'device-lost': ' — reload the page to get a new GPU device',
};

export function errorInfo(e: unknown): WorkerErrorInfo {
  if (e instanceof StudioFailure) return { kind: e.kind, message: e.message, detail: e.detail };
  if (e instanceof Error) {
    if (e.name === 'GpuError') {
      const kind = (e as Error & { kind: string }).kind;
      const mapped: ErrorKind = kind === 'out-of-memory' ? 'out-of-memory' : kind === 'device-lost' ? 'device-lost' : kind === 'unsupported' ? 'no-webgpu' : 'gpu';
      return { kind: mapped, message: e.message + (HINTS[mapped] ?? ''), detail: e.stack };
    }
    // A named input or settings problem is the whole story: its stack would only bury the one line.
    const kind = BY_NAME[e.name];
    return kind ? { kind, message: e.message } : { kind: 'internal', message: e.message, detail: e.stack };
  }
  return { kind: 'internal', message: String(e) };
}
