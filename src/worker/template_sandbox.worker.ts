// Entry of the template sandbox worker: renders one chat template per request with the jinja engine
// transformers.js uses (see template_sandbox.ts), each template compiled once.
import { Template } from '@huggingface/jinja';
import type { TemplateReply, TemplateRequest } from './template_sandbox.ts';

const compiled = new Map<string, Template>();
const post = self.postMessage.bind(self) as (r: TemplateReply) => void;

self.onmessage = (ev: MessageEvent<TemplateRequest>) => {
  const { id, template, variables } = ev.data;
  try {
    if (!compiled.has(template)) compiled.set(template, new Template(template));
    post({ id, text: compiled.get(template)!.render(variables) });
  } catch (e) {
    post({ id, error: String((e as Error)?.message ?? e).split('\n')[0] });
  }
};
