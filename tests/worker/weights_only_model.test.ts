// A weights-only model folder (config.json + model.safetensors, no tokenizer.json) in the studio worker's
// StepRunner (src/worker/runner.ts), issue 24: it loads without a tokenizer and says so, the Doctor skips its
// tokenizer rules with that reason, an imported id batch steps through every stage and scores exactly as the
// same weights loaded with their tokenizer (a tokenizer plays no part in scoring ids, as `grpo-studio score`),
// and what needs a tokenizer (the prompt set, the template diff) is refused with a one-line message.
import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { STAGES, type StagePayloads, type StepRunner } from '../../src/bridge/protocol.ts';
import { RULES } from '../../src/doctor/rules.ts';
import { smallSettings } from '../helpers/small_settings.ts';
import { testGpu } from '../helpers/gpu.ts';
import { tempDir } from '../fixtures/models.ts';
import type { TemplateVariant } from '../../src/tokenize/template_diff.ts';

const TINY = resolve(__dirname, '../../public/models/tiny-adder');
const TOKENIZER_RULES = RULES.filter((r) => r.needsTokenizer).map((r) => r.id);

/** tiny-adder's files `names`, copied to a temp folder and sent as the page sends a dropped directory. */
function folder(name: string, names: string[]): File[] {
  const dir = tempDir(name);
  for (const f of names) copyFileSync(join(TINY, f), join(dir, f));
  return readdirSync(dir).map((f) => {
    const file = new File([readFileSync(join(dir, f))], f);
    Object.defineProperty(file, 'webkitRelativePath', { value: `${name}/${f}` });
    return file;
  });
}

/** Two groups of two completions over tiny-adder's 328 ids, EOS 304 (its config's), padded with EOS. */
const BATCH: GrpoBatch = {
  format: 'grpo-batch/v1',
  num_generations: 2,
  pad_token_id: 304,
  eos_token_ids: [304],
  prompt_ids: [[302, 17, 40, 9], [302, 17, 40, 9], [302, 55, 3], [302, 55, 3]],
  completion_ids: [[12, 13, 304], [14, 304], [20, 21, 22, 304], [23, 304]],
  completion_mask: [[1, 1, 1], [1, 1], [1, 1, 1, 1], [1, 1]],
  rewards: [1, 0, 0.5, 2],
};

const variant = (label: string): TemplateVariant => ({ label, chat_template: null, add_generation_prompt: true, template_kwargs: {} });

async function stepAll(runner: StepRunner): Promise<StagePayloads> {
  const out: Partial<StagePayloads> = {};
  const settings = smallSettings(2, 4);
  for (const stage of STAGES) (out as Record<string, unknown>)[stage] = (await runner.runStage(stage, settings, stage === 'render' ? { kind: 'batch', batch: structuredClone(BATCH) } : undefined)).data;
  return out as StagePayloads;
}

describe('a weights-only model folder (issue 24)', () => {
  it('loads without a tokenizer, skips the tokenizer rules naming why, steps an id batch and refuses the prompt set', async () => {
    const gpu = await testGpu();
    const bare = createStepRunner(gpu);
    const info = await bare.load({ kind: 'local', name: 'weights-only', files: folder('weights-only', ['config.json', 'model.safetensors']) }, () => {});
    expect(info.tokenizer).toBeNull();
    expect(info.no_tokenizer).toBe('no tokenizer: ids shown, tokenizer rules skipped');
    expect(info.chat_template).toBeNull();
    expect(info.vocab_size).toBe(328);

    // The Doctor: every rule that reads the tokenizer is skipped with the reason, none runs.
    const { report, token_texts } = bare.inspect(BATCH);
    expect(token_texts).toBeUndefined();
    expect(TOKENIZER_RULES.length).toBeGreaterThan(0);
    for (const rule of TOKENIZER_RULES) expect(report.skipped.find((s) => s.rule === rule)?.reason).toMatch(/^the loaded model \(weights-only\): no tokenizer: ids shown, tokenizer rules skipped/);
    expect(bare.tokenizerFor(BATCH)).toBeNull();

    // What renders text is refused in one line naming what is missing; the model stays usable.
    await expect(bare.runStage('render', smallSettings(2, 4), { kind: 'prompts' })).rejects.toThrow(/^weights-only has no tokenizer \(no tokenizer\.json in its folder\): the prompt set .* needs one; import an id batch/);
    await expect(bare.templateDiff([[{ role: 'user', content: 'hi' }]], [variant('A'), variant('B')])).rejects.toThrow(/no tokenizer .*the template diff needs one/);

    const stepped = await stepAll(bare);
    expect(stepped.render).toBeNull();
    expect(stepped.assemble.token_texts).toBeNull();
    expect(stepped.assemble.padded.B).toBe(4);

    // The same weights with their tokenizer score the same ids bit for bit, and step to the same loss.
    const full = createStepRunner(gpu);
    const withTok = await full.load({ kind: 'local', name: 'tiny-adder', files: folder('with-tokenizer', ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) }, () => {});
    expect(withTok.tokenizer).not.toBeNull();
    const ref = await stepAll(full);
    expect(stepped.policy_forward.per_token_logps).toEqual(ref.policy_forward.per_token_logps);
    expect(stepped.loss.loss).toBe(ref.loss.loss);
    expect(stepped.re_evaluate.loss_after).toBe(ref.re_evaluate.loss_after);
    expect(Number.isFinite(stepped.re_evaluate.loss_after)).toBe(true);
    bare.dispose();
    full.dispose();
  });
});
