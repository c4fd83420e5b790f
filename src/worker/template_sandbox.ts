// Chat-template rendering with a time bound, in the page: the browser counterpart of
// src/tokenize/bounded_node.ts. A chat template is a program (pasted by the user, or shipped with a
// checkpoint); it runs in its own module worker on the template and variables Tokenizer.templateInput
// gives — the text apply_chat_template renders — and a render that overruns its deadline terminates that
// worker and is a TemplateError naming the limit (the next render starts a fresh worker). The studio
// worker then tokenizes the text.
import type { ChatMessage } from '../io/batch.ts';
import type { BoundedRenderer } from '../tokenize/bounded_node.ts';
import { TemplateError, type RenderOptions, type Tokenizer } from '../tokenize/tokenizer.ts';

export interface TemplateRequest {
  id: number;
  template: string;
  variables: Record<string, unknown>;
}

export type TemplateReply = { id: number; text: string } | { id: number; error: string };

/** A real template renders a conversation in well under a millisecond; startup (module load) included. */
export const TEMPLATE_TIMEOUT_MS = 5_000;

/** What the renderer needs from a worker (a DOM Worker in the page). */
export interface TemplateWorkerLike {
  postMessage(msg: TemplateRequest): void;
  terminate(): void;
  onmessage: ((ev: { data: TemplateReply }) => void) | null;
  onerror: ((ev: { message?: string }) => void) | null;
}

export function browserTemplateWorker(): TemplateWorkerLike {
  return new Worker(new URL('./template_sandbox.worker.ts', import.meta.url), { type: 'module', name: 'template-sandbox' }) as unknown as TemplateWorkerLike;
}

/** A BoundedRenderer over `tok`'s templates, one render at a time. */
export function sandboxRenderer(tok: Tokenizer, spawn: () => TemplateWorkerLike = browserTemplateWorker, timeoutMs = TEMPLATE_TIMEOUT_MS): BoundedRenderer {
  let worker: TemplateWorkerLike | null = null;
  let nextId = 1;
  return {
    render(messages: readonly ChatMessage[], opts: RenderOptions = {}): Promise<string> {
      let input: ReturnType<Tokenizer['templateInput']>;
      try {
        input = tok.templateInput(messages, opts);
      } catch (e) {
        return Promise.reject(new TemplateError(`no chat template to render: ${(e as Error).message.split('\n')[0]}`, 'raised'));
      }
      const w = (worker ??= spawn());
      const id = nextId++;
      return new Promise<string>((resolve, reject) => {
        const stop = (e: TemplateError) => {
          clearTimeout(timer);
          w.terminate();
          worker = null;
          reject(e);
        };
        const timer = setTimeout(() => stop(new TemplateError(`the chat template did not finish within ${timeoutMs} ms`)), timeoutMs);
        w.onmessage = ({ data }) => {
          if (data.id !== id) return;
          clearTimeout(timer);
          if ('error' in data) reject(new TemplateError(`the chat template raised: ${data.error}`, 'raised'));
          else resolve(data.text);
        };
        w.onerror = (ev) => stop(new TemplateError(`the chat template worker failed: ${ev.message ?? 'unknown error'}`));
        w.postMessage({ id, ...input });
      });
    },
    async close() {
      worker?.terminate();
      worker = null;
    },
  };
}
