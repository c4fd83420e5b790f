// template-mismatch: prompt_ids are not the chat-template rendering of the conversation. Training then
// computes log-probs on a different token sequence than generation used (seed 002 bug #3: generation used
// the templated prompt, the loss the raw one; bug #1: SFT without the template RL uses).
import type { ChatMessage } from '../../io/batch.ts';
import type { Finding, Rule } from '../types.ts';
import { firstDiff, showToken, msg } from '../util.ts';

export const templateMismatch: Rule = {
  id: 'template-mismatch',
  title: 'Prompt is not the chat-template rendering',
  severity: 'error',
  description: 'prompt_ids differ from the tokenizer\'s chat template applied to `messages` with add_generation_prompt (first differing token shown, both decoded); without messages, a prompt lacking the assistant header.',
  seed: '002 (bugs #1 and #3: template used for generation but not for the loss / SFT)',
  needsTokenizer: true,
  check(ctx) {
    const tok = ctx.options.tokenizer;
    if (!tok) return 'needs a tokenizer (--tokenizer DIR)';
    if (!tok.has_chat_template) return 'the tokenizer has no chat template';
    const { batch } = ctx;
    const kwargs = batch.config?.chat_template_kwargs;
    const out: Finding[] = [];
    const real = (b: number) => (batch.prompt_mask ? batch.prompt_ids[b].filter((_, t) => batch.prompt_mask![b][t] === 1) : batch.prompt_ids[b]);
    if (batch.messages) {
      const perSample = batch.messages.length === ctx.B;
      const rendered = new Map<ChatMessage[], number[]>();
      batch.prompt_ids.forEach((_, b) => {
        const conv = batch.messages![perSample ? b : Math.floor(b / ctx.G)];
        if (!conv) return;
        // A whole conversation (issue 25: generated turns included) is compared up to its first assistant turn.
        const first = conv.findIndex((m) => m?.role === 'assistant');
        if (!rendered.has(conv)) rendered.set(conv, tok.renderChat(first < 0 ? conv : conv.slice(0, first), { add_generation_prompt: true, template_kwargs: kwargs, tools: batch.tools }).ids);
        const expected = rendered.get(conv)!;
        const ids = real(b);
        const t = firstDiff(ids, expected);
        if (t < 0) return;
        out.push({
          rule: this.id, severity: 'error', sample: b, field: 'prompt_ids', span: [t, t + 1],
          message: msg`sample ${b}: prompt_ids differ from the chat template at token ${t}: ${showToken(ctx, ids[t])} vs template ${showToken(ctx, expected[t])}; ${ids.length} vs ${expected.length} tokens`,
          hint: 'Tokenize exactly the templated text used for generation (apply_chat_template(..., add_generation_prompt=True), then encode without adding special tokens) for the loss too; check chat_template_kwargs such as enable_thinking.',
        });
      });
      return out;
    }
    // No messages: the prompt should at least end with the assistant header the template writes.
    const probe = [{ role: 'user', content: 'x' }];
    const withGen = tok.applyChatTemplate(probe, { add_generation_prompt: true, template_kwargs: kwargs });
    const without = tok.applyChatTemplate(probe, { add_generation_prompt: false, template_kwargs: kwargs });
    if (!withGen.startsWith(without) || withGen === without) return 'the chat template has no separable generation prompt';
    const header = withGen.slice(without.length).split('\n')[0]; // e.g. "<|im_start|>assistant"
    const missing = batch.prompt_ids.map((_, b) => b).filter((b) => !tok.decode(real(b)).includes(header));
    if (missing.length === 0) return [];
    return [{
      rule: this.id, severity: 'warning', sample: missing[0], field: 'prompt_ids',
      message: msg`${missing.length} of ${ctx.B} prompts do not contain the assistant header ${JSON.stringify(header)}: the chat template was probably not applied`,
      hint: 'Render prompts with the chat template (add_generation_prompt=True) before tokenizing, for generation and loss alike. Export `messages` to let the Doctor compare token by token.',
    }];
  },
};
