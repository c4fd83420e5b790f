// The golden float64 PyTorch model references (tests/golden/models, copied from shared/golden; tolerances
// in its README): where they are and the models every golden test and CLI test runs on.
import { resolve } from 'node:path';

/** Root of the golden fixtures kept in the repository (a copy of shared/golden with its READMEs). */
export const GOLDEN_ROOT = resolve(__dirname, '../golden');
export const GOLDEN = resolve(GOLDEN_ROOT, 'models');

/** Every golden model folder; tiny-llama-bf16 checks the bf16 → f32 load path. */
export const GOLDEN_MODELS = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3', 'tiny-llama-bf16'];
