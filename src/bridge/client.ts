// Page side of the worker protocol: typed request → promise of the typed response, plus events
// (load progress, device lost). One client per page; requests are answered in any order, by id. A request
// may carry its own progress callback and be cancelled through an AbortSignal (the
// promise rejects with Cancelled at once; whatever the worker still sends for it is dropped). Results sent
// in row slices (src/bridge/rows.ts) are put back together before the promise resolves.
import { Cancelled, StudioFailure } from './errors.ts';
import type { LoadProgress, Request, RequestEnvelope, Responses, WorkerErrorInfo, WorkerMessage } from './protocol.ts';
import { RowCollector } from './rows.ts';

export interface ClientEvents {
  onProgress(p: LoadProgress): void;
  onDeviceLost(e: WorkerErrorInfo): void;
}

/** What the client needs from a worker (a DOM Worker in the page). */
export interface PortLike {
  postMessage(msg: RequestEnvelope): void;
  onmessage: ((ev: MessageEvent<WorkerMessage>) => void) | null;
  onerror: ((ev: ErrorEvent) => void) | null;
}

export class StudioClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    private readonly port: PortLike,
    private readonly events: ClientEvents,
  ) {
    port.onmessage = (ev) => this.receive(ev.data);
    port.onerror = (ev) => {
      // A worker that fails to start (or throws at top level) fails every pending request.
      const err = new StudioFailure('internal', `studio worker failed: ${ev.message || 'could not start'}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
  }

  request<T extends Request['type']>(request: Extract<Request, { type: T }>, opts: RequestOptions = {}): Promise<Responses[T]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (opts.signal?.aborted) return reject(new Cancelled());
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        this.port.postMessage({ id: this.nextId++, request: { type: 'cancel', target: id } });
        reject(new Cancelled());
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => opts.signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (v) => (done(), resolve(v as Responses[T])),
        reject: (e) => (done(), reject(e)),
        onProgress: opts.onProgress,
        rows: new RowCollector(),
      });
      this.port.postMessage({ id, request });
    });
  }

  private receive(msg: WorkerMessage): void {
    if ('event' in msg) {
      if (msg.event === 'progress') {
        if (msg.id === undefined) this.events.onProgress(msg.progress);
        else this.pending.get(msg.id)?.onProgress?.(msg.progress);
      } else if (msg.event === 'rows') this.pending.get(msg.id)?.rows.add(msg.parts);
      else this.events.onDeviceLost(msg.error);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.ok) p.resolve(p.rows.restore(msg.result));
    else p.reject(new StudioFailure(msg.error.kind, msg.error.message, msg.error.detail));
  }
}

export interface RequestOptions {
  /** Progress events of this request. */
  onProgress?: (p: LoadProgress) => void;
  signal?: AbortSignal;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
  onProgress?: (p: LoadProgress) => void;
  rows: RowCollector;
}
