// The typed GPU error every layer above reports: what kind of failure, and which kernel (or stage) it
// was, so a message points at the dispatch that failed rather than at the batch of work around it.

export type GpuErrorKind = 'validation' | 'out-of-memory' | 'internal' | 'device-lost' | 'unsupported';

/** A GPU failure with the name of the kernel (or stage) that caused it. */
export class GpuError extends Error {
  constructor(
    readonly kind: GpuErrorKind,
    readonly kernel: string,
    message: string,
  ) {
    super(`[${kind}] ${kernel}: ${message}`);
    this.name = 'GpuError';
  }
}

