// What the page is told about the models the studio worker's runner (src/worker/runner.ts) holds: the
// policy and its tokenizer, a reference checkpoint, a LoRA adapter (src/worker/adapter.ts), and the memory
// plan (src/model/plan.ts, as `grpo-studio plan`) of an update as the runner would run it: the policy's
// storage and adapter, the frozen copy and any reference checkpoint, the undo copy.
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROMPTS } from '../grpo/default_task.ts';
import { countParams } from '../model/config.ts';
import type { BufferLimits } from '../model/memory.ts';
import type { CausalLM } from '../model/model.ts';
import { LORA_CREATE_FIELDS } from '../model/lora_fields.ts';
import { planStep } from '../model/plan.ts';
import { NO_TOKENIZER } from '../doctor/index.ts';
import type { ChatMessage } from '../io/batch.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { AdapterSlot } from './adapter.ts';
import type { ModelInfo, PagePlan } from '../bridge/protocol.ts';

export interface HeldModels {
  limits: BufferLimits;
  policy: CausalLM;
  name: string;
  /** None: a weights-only folder; id batches step, the prompt set cannot be rendered. */
  tokenizer: { tokenizer: Tokenizer; kind: string } | null;
  /** The weights as loaded (none under an adapter). */
  frozen: CausalLM | null;
  refModel: { model: CausalLM; name: string } | null;
  adapter: AdapterSlot | null;
}

/**
 * The longest rendered prompt of `conversations`, in tokens. Without a tokenizer (nothing renders them) their UTF-8
 * bytes: a byte-level BPE never emits more tokens than bytes, so the plan errs on the large side (template tokens aside).
 */
export function longestPrompt(h: HeldModels, conversations: readonly ChatMessage[][]): number {
  const utf8 = new TextEncoder();
  const tokens = (c: ChatMessage[]) => (h.tokenizer ? h.tokenizer.tokenizer.renderChat(c).ids.length : c.reduce((n, m) => n + utf8.encode(m.content).length, 0));
  return Math.max(1, ...conversations.map(tokens));
}

/** The plan of an update of B rows, prompts of up to P tokens and C new tokens. */
export function pagePlan(h: HeldModels, B: number, P: number, C: number): PagePlan {
  const policy = h.policy;
  const options = {
    B,
    T: P + C,
    prompt: P,
    adapter: policy.adapter?.config.r ?? null,
    adapter_modules: h.adapter?.info().modules,
    checkpointing: policy.checkpointing,
    dtype: policy.info?.dtypes.includes('BF16') ? ('bf16' as const) : ('f32' as const),
    held_reference_bytes: (h.frozen?.weightBytes ?? 0) + (h.refModel?.model.weightBytes ?? 0),
    undo: true,
  };
  const plan = planStep(policy.config, { ...options, limits: h.limits });
  if (options.adapter !== null) return { options, plan };
  // The alternative a full fine-tune is offered when it does not fit the user's budget: the adapter the
  // create form makes by default (all linear layers), the base frozen in its checkpoint dtype, no frozen
  // copy of the weights (the adapter-off view is the reference), a held reference checkpoint kept.
  const lora = { ...options, adapter: LORA_CREATE_FIELDS.r.default, adapter_modules: undefined, held_reference_bytes: h.refModel?.model.weightBytes ?? 0 };
  return { options, plan, lora: { options: lora, plan: planStep(policy.config, { ...lora, limits: h.limits }) } };
}

/** The loaded model as the page shows it, with the memory plan of an update on the default task. */
export function modelInfo(h: HeldModels): ModelInfo {
  const { policy, refModel: ref } = h;
  const tokenizer = h.tokenizer?.tokenizer;
  const cfg = policy.config;
  const eos = tokenizer?.eos_token_id;
  const P = longestPrompt(h, DEFAULT_PROMPTS.map((p) => p.messages));
  return {
    name: h.name,
    model_type: cfg.model_type,
    architectures: [cfg.architecture],
    num_parameters: countParams(cfg),
    dtype: policy.info?.dtypes.join(', ') ?? 'F32',
    vocab_size: cfg.vocab_size,
    dropout: cfg.dropout,
    tokenizer: tokenizer ? { kind: h.tokenizer!.kind, bos_token_id: tokenizer.bos_token_id ?? null, eos_token_ids: eos === undefined ? [] : [eos], pad_token_id: tokenizer.pad_token_id ?? null, special_token_ids: [...tokenizer.special_token_ids] } : null,
    no_tokenizer: tokenizer ? null : NO_TOKENIZER,
    chat_template: (tokenizer?.hf.chat_template as string | null | undefined) ?? null,
    memory_plan: pagePlan(h, DEFAULT_PROMPTS.length * DEFAULT_GRPO_CONFIG.num_generations, P, DEFAULT_GRPO_CONFIG.max_completion_length ?? 8),
    reference: ref && {
      name: ref.name,
      model_type: ref.model.config.model_type,
      num_parameters: countParams(ref.model.config),
      dtype: ref.model.info?.dtypes.join(', ') ?? 'F32',
      bytes: ref.model.weightBytes,
    },
    adapter: h.adapter?.info() ?? null,
  };
}
