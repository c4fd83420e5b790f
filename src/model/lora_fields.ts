// The options of a new LoRA adapter (PEFT LoraConfig's r, lora_alpha, use_rslora, target_modules, and the
// seed of lora_A's init), one table for every place that asks for them: the page's create form takes its
// defaults, bounds and hints from it (through src/store/vocabulary.ts), `grpo-studio step --create-adapter`
// parses its key=value list with it, and initLoraWeights (src/model/lora.ts), which both call, checks the
// values against it. Declarative (names, defaults, bounds, text; no computation), so the store may read it.

/** What a new adapter is made from: PEFT LoraConfig fields, and the seed of A's init. */
export interface NewLoraOptions {
  r: number;
  lora_alpha: number;
  use_rslora: boolean;
  target_modules: string[] | 'all-linear';
  seed: number;
}

/** How one option is written and bounded. */
export type LoraFieldSpec =
  | { kind: 'integer' | 'number'; min?: number; max?: number; default: number; doc: string }
  | { kind: 'boolean'; default: boolean; doc: string }
  | { kind: 'modules'; default: 'all-linear'; doc: string };

/**
 * The fields of NewLoraOptions, in the order they are shown. Defaults are the page's: PEFT's LoraConfig has
 * r 8 and lora_alpha 8; lora_alpha = 2·r is the common choice and all-linear the explicit form of the usual
 * "every projection".
 */
export const LORA_CREATE_FIELDS = {
  r: { kind: 'integer', min: 1, default: 8, doc: 'rank: lora_A is (r, in_features), lora_B (out_features, r)' },
  lora_alpha: { kind: 'number', default: 16, doc: 'scaling = lora_alpha / r (lora_alpha / √r with use_rslora)' },
  use_rslora: { kind: 'boolean', default: false, doc: 'scaling = lora_alpha / √r instead of lora_alpha / r (rank-stabilized LoRA)' },
  target_modules: {
    kind: 'modules',
    default: 'all-linear',
    doc: 'all-linear (every linear layer but the output layer) or module names, each matched exactly or as a dotted suffix (PEFT)',
  },
  // Rng takes the seed as a uint32: a wider one would alias a smaller one.
  seed: { kind: 'integer', min: 0, max: 0xffffffff, default: 0, doc: "seed of lora_A's Kaiming-uniform init (lora_B starts at 0)" },
} satisfies Record<keyof NewLoraOptions, LoraFieldSpec>;
