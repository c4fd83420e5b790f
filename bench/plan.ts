// `npm run bench -- --only plan`: the memory plan (src/model/plan.ts) of one GRPO step at 8 × 512 (256
// prompt + 256 completion) for the real configs in tests/fixtures/configs, against the targets:
// LoRA r = 16 on all linear layers ≤ 6 GiB (0.5–1B models) or ≤ 8 GiB (1.5B), with gradient checkpointing;
// full fine-tuning of SmolLM2-135M and GPT-2 ≤ 4 GiB; scoring Qwen2.5-1.5B ≤ 4 GiB. No GPU work: the
// plan needs only the configs. Each row says which component dominates when a target is missed.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../src/model/config.ts';
import { DEFAULT_LIMITS } from '../src/model/memory.ts';
import { planStep, type PlanOptions } from '../src/model/plan.ts';
import type { Row } from './types.ts';

const CONFIGS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../tests/fixtures/configs');
const GiB = 2 ** 30;

const TARGETS: { model: string; mode: 'lora' | 'full' | 'score'; target: number }[] = [
  ...['Qwen2.5-0.5B', 'Qwen3-0.6B', 'Llama-3.2-1B', 'SmolLM2-360M'].map((model) => ({ model, mode: 'lora' as const, target: 6 })),
  ...['Qwen2.5-1.5B', 'DeepSeek-R1-Distill-Qwen-1.5B'].map((model) => ({ model, mode: 'lora' as const, target: 8 })),
  ...['SmolLM2-135M', 'gpt2'].map((model) => ({ model, mode: 'full' as const, target: 4 })),
  { model: 'Qwen2.5-1.5B', mode: 'score', target: 4 },
];

export async function run(): Promise<Row[]> {
  return TARGETS.map(({ model, mode, target }) => {
    const raw = JSON.parse(readFileSync(path.join(CONFIGS, `${model}.json`), 'utf8'));
    const opts: PlanOptions = {
      B: 8, T: 512, prompt: 256, adapter: mode === 'lora' ? 16 : null, checkpointing: mode !== 'score', scoreOnly: mode === 'score',
      dtype: raw.torch_dtype === 'bfloat16' ? 'bf16' : 'f32', limits: DEFAULT_LIMITS,
    };
    const p = planStep(parseConfig(raw), opts);
    const [top, bytes] = Object.entries(p.bytes).sort((a, b) => b[1] - a[1])[0];
    const g = (x: number) => +(x / GiB).toFixed(3);
    return {
      model, mode, target_gib: target, total_gib: g(p.total_bytes), meets: p.total_bytes <= target * GiB ? 'yes' : 'no',
      weights: g(p.bytes.weights), optimizer: g(p.bytes.grads + p.bytes.optimizer), activations: g(p.bytes.activations),
      logits: g(p.bytes.logits_chunk), reference: g(p.bytes.reference), scratch: g(p.bytes.scratch), largest: `${top} ${g(bytes)}`,
    };
  });
}
