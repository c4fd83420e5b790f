// The same prompts rendered with two chat-template variants — the tokenizer's template against a pasted
// one, or the same template with other arguments (add_generation_prompt, enable_thinking) — tokenized
// and aligned token by token (src/io/batch_diff.ts alignTokens), so a template change shows as the tokens
// it inserts or removes rather than as everything after them moving. Rendering goes through a
// BoundedRenderer (a template is a program shipped with a checkpoint: bounded_node.ts in Node, the
// template sandbox worker in the page), then the text is tokenized as TRL tokenizes a rendered prompt.
import { alignTokens, type TokenOp } from '../io/batch_diff.ts';
import type { ChatMessage } from '../io/batch.ts';
import { TemplateError, type RenderOptions, type Tokenizer } from './tokenizer.ts';
import type { BoundedRenderer } from './bounded_node.ts';

/** One way of rendering: a template (null = the tokenizer's own) and its arguments. */
export interface TemplateVariant {
  label: string;
  chat_template: string | null;
  add_generation_prompt: boolean;
  /** Extra template variables, e.g. { enable_thinking: false }. */
  template_kwargs: Record<string, unknown>;
}

/** One side of one prompt: its token ids and each token's decoded text. */
export interface RenderedSide {
  ids: number[];
  texts: string[];
}

export interface TemplateDiffRow {
  a: RenderedSide;
  b: RenderedSide;
  ops: TokenOp[];
  removed: number; // tokens only in a
  added: number; // tokens only in b
}

export interface TemplateDiff {
  variants: [TemplateVariant, TemplateVariant];
  rows: TemplateDiffRow[];
  summary: { prompts: number; prompts_changed: number; removed: number; added: number; same: number };
}

const renderOptions = (v: TemplateVariant): RenderOptions => ({ add_generation_prompt: v.add_generation_prompt, template_kwargs: v.template_kwargs, chat_template: v.chat_template ?? undefined });

/** Renders every conversation with both variants and aligns the two token rows of each. */
export async function diffTemplates(tok: Tokenizer, conversations: readonly ChatMessage[][], variants: [TemplateVariant, TemplateVariant], renderer: Pick<BoundedRenderer, 'render'>): Promise<TemplateDiff> {
  // An empty pasted template would quietly fall back to the tokenizer's own (transformers.js treats '' as none).
  for (const v of variants) if (v.chat_template !== null && v.chat_template.trim() === '') throw new TemplateError(`template "${v.label}": the pasted chat template is empty`, 'raised');
  const side = async (conv: readonly ChatMessage[], v: TemplateVariant, i: number): Promise<RenderedSide> => {
    let text: string;
    try {
      text = await renderer.render(conv, renderOptions(v));
    } catch (e) {
      throw new TemplateError(`template "${v.label}", prompt ${i}: ${(e as Error).message.split('\n')[0]}`, e instanceof TemplateError ? e.kind : 'raised');
    }
    const ids = tok.encode(text);
    // Each token's span of the text (a token holding part of a character shows that character).
    const { text: decoded, tokens } = tok.spans(ids);
    return { ids, texts: tokens.map((t) => decoded.slice(t.start, t.end)) };
  };
  const rows: TemplateDiffRow[] = [];
  const summary = { prompts: conversations.length, prompts_changed: 0, removed: 0, added: 0, same: 0 };
  for (let i = 0; i < conversations.length; i++) {
    const a = await side(conversations[i], variants[0], i);
    const b = await side(conversations[i], variants[1], i);
    const ops = alignTokens(a.ids, b.ids, (id) => tok.isSpecial(id));
    const removed = ops.filter((o) => o.op === 'removed').length;
    const added = ops.filter((o) => o.op === 'added').length;
    rows.push({ a, b, ops, removed, added });
    summary.prompts_changed += removed + added > 0 ? 1 : 0;
    summary.removed += removed;
    summary.added += added;
    summary.same += ops.length - removed - added;
  }
  return { variants, rows, summary };
}
