// The golden float64 PyTorch model references (../shared/golden/models beside the repository; tolerances
// in its README): where they are and the models every golden test and CLI test runs on.
import { resolve } from 'node:path';

export const GOLDEN = resolve(__dirname, '../../../shared/golden/models');

/** Every golden model folder; tiny-llama-bf16 checks the bf16 → f32 load path. */
export const GOLDEN_MODELS = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3', 'tiny-llama-bf16'];
