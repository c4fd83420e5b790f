// Chat-template rendering with a time and memory bound, in Node. A chat template is a program shipped with
// a checkpoint: a huge loop in it used to run the Doctor out of heap after a minute. Here the template runs
// in a worker_thread with its own heap limit (resourceLimits) and a deadline; a template that overruns
// either is a TemplateError naming the conversation (CLI: exit 2), and the worker is terminated. The
// worker runs the jinja engine transformers.js uses (@huggingface/jinja) on the template and variables
// Tokenizer.templateInput gives — the same text Tokenizer.applyChatTemplate renders (tested) — without
// loading a tokenizer, so it starts in well under a second; a conversation that finishes here is then
// rendered in-thread at the same bounded cost. The browser worker can implement `BoundedRenderer` alike.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { ChatMessage } from '../io/batch.ts';
import { TemplateError, type RenderOptions, type Tokenizer } from './tokenizer.ts';

export { TemplateError };

export interface TemplateBounds {
  /** Wall time for one render, after the worker has loaded the tokenizer. */
  timeoutMs: number;
  /** The worker's old-generation heap; a template that needs more is stopped. */
  maxHeapMb: number;
}

/** Real templates render a conversation in well under a millisecond and a few MB. */
export const DEFAULT_TEMPLATE_BOUNDS: TemplateBounds = { timeoutMs: 5_000, maxHeapMb: 256 };

export interface BoundedRenderer {
  render(messages: readonly ChatMessage[], opts?: RenderOptions): Promise<string>;
  close(): Promise<void>;
}

/** The worker: plain CommonJS (no TypeScript loader needed in the thread), compiling each template once. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { Template } = require(workerData.jinja);
const compiled = new Map();
parentPort.on('message', ({ id, template, variables }) => {
  try {
    if (!compiled.has(template)) compiled.set(template, new Template(template));
    parentPort.postMessage({ id, text: compiled.get(template).render(variables) });
  } catch (e) {
    parentPort.postMessage({ id, error: String((e && e.message) || e).split('\\n')[0] });
  }
});
parentPort.postMessage({ ready: true });
`;

type Reply = { ready?: true; id?: number; text?: string; error?: string };

/** A renderer over `tok`'s own tokenizer.json / tokenizer_config.json, in a worker bounded by `bounds`. */
export function boundedRenderer(tok: Tokenizer, bounds: TemplateBounds = DEFAULT_TEMPLATE_BOUNDS): BoundedRenderer {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { jinja: createRequire(import.meta.url).resolve('@huggingface/jinja') },
    resourceLimits: { maxOldGenerationSizeMb: bounds.maxHeapMb },
  });
  let failure: Error | null = null;
  let nextId = 0;
  const waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  const fail = (e: Error) => {
    failure ??= e;
    for (const w of waiting.values()) w.reject(failure);
    waiting.clear();
  };
  const ready = new Promise<void>((resolve, reject) => {
    worker.on('message', (r: Reply) => {
      if (r.ready) return resolve();
      waiting.get(r.id!)?.resolve(r);
      waiting.delete(r.id!);
    });
    worker.on('error', (e: Error & { code?: string }) => {
      const err = e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? new TemplateError(`the chat template needed more than ${bounds.maxHeapMb} MB of memory`) : new TemplateError(`the chat template worker failed: ${e.message.split('\n')[0]}`);
      fail(err);
      reject(err);
    });
    worker.on('exit', () => fail(new TemplateError('the chat template worker stopped')));
  });
  return {
    async render(messages, opts = {}) {
      await ready;
      if (failure) throw failure;
      let input: { template: string; variables: Record<string, unknown> };
      try {
        input = tok.templateInput(messages, opts);
      } catch (e) {
        throw new TemplateError(`no chat template to render: ${(e as Error).message.split('\n')[0]}`, 'raised');
      }
      const id = nextId++;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const reply = await new Promise<Reply>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        timer = setTimeout(() => {
          const e = new TemplateError(`the chat template did not finish within ${bounds.timeoutMs} ms`);
          fail(e);
          void worker.terminate();
        }, bounds.timeoutMs);
        worker.postMessage({ id, ...input });
      }).finally(() => clearTimeout(timer));
      if (reply.error !== undefined) throw new TemplateError(`the chat template raised: ${reply.error}`, 'raised');
      return reply.text!;
    },
    async close() {
      await worker.terminate();
    },
  };
}

/**
 * Renders every distinct conversation of a batch (and the probe the Doctor renders without messages) in a
 * bounded worker, so the in-thread rendering that follows is known to finish. Throws TemplateError naming
 * the first conversation that overruns or raises.
 */
export async function preflightTemplate(tok: Tokenizer, conversations: readonly ChatMessage[][] | undefined, kwargs: Record<string, unknown> | undefined, bounds: TemplateBounds = DEFAULT_TEMPLATE_BOUNDS): Promise<void> {
  if (!tok.has_chat_template) return;
  const r = boundedRenderer(tok, bounds);
  try {
    const probe: ChatMessage[] = [{ role: 'user', content: 'x' }];
    const seen = new Set<string>();
    const all: [string, readonly ChatMessage[]][] = [['a one-message probe', probe], ...(conversations ?? []).map((c, i): [string, ChatMessage[]] => [`messages[${i}]`, c])];
    for (const [name, conv] of all) {
      const key = JSON.stringify(conv);
      if (seen.has(key)) continue;
      seen.add(key);
      for (const add_generation_prompt of [true, false]) {
        try {
          await r.render(conv, { add_generation_prompt, template_kwargs: kwargs });
        } catch (e) {
          // A template that raises does so in-thread too, where the Doctor reports it: only overruns stop here.
          if (e instanceof TemplateError && e.kind === 'raised') continue;
          throw new TemplateError(`rendering ${name}: ${(e as Error).message}`);
        }
      }
    }
  } finally {
    await r.close();
  }
}
