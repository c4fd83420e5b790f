// Page side of the worker protocol: typed request → promise of the typed response, plus events
// (load progress, device lost). One client per page; requests are answered in any order, by id.
import { StudioFailure } from './errors.ts';
import type { LoadProgress, Request, RequestEnvelope, Responses, WorkerErrorInfo, WorkerMessage } from './protocol.ts';

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
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();

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

  request<T extends Request['type']>(request: Extract<Request, { type: T }>): Promise<Responses[T]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.port.postMessage({ id, request });
    });
  }

  private receive(msg: WorkerMessage): void {
    if ('event' in msg) {
      if (msg.event === 'progress') this.events.onProgress(msg.progress);
      else this.events.onDeviceLost(msg.error);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.ok) p.resolve(msg.result);
    else p.reject(new StudioFailure(msg.error.kind, msg.error.message, msg.error.detail));
  }
}
