// The page's LoRA path through the studio worker's StepRunner (src/worker/runner.ts + src/worker/adapter.ts),
// driven in Node as the page drives it (dropped folders as File objects): the golden case
// tests/golden/lora/qwen2-qv-r2-rslora (README "LoRA adapters") loaded as base + adapter, its batch stepped as
// an import; per-token log-probs, reference (base without adapter), KL, loss, grad norm, post-step log-probs
// and the saved PEFT folder against the golden values within the README's tolerances; only adapter groups in
// the step's norms. A created adapter (PEFT init: B = 0) scores exactly as the base, and a step changes only
// adapter tensors (every base weight bit-identical). Sampling goes through the adapter (the sampler's
// log-probs are the adapted policy's). A bf16 base is reloaded frozen in bf16. Bad adapters fail with one
// line naming the key.
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseSafeTensors, toF32, toF64, writeSafeTensors } from '../../src/io/safetensors.ts';
import { Rng } from '../../src/model/rng.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import type { CausalLM } from '../../src/model/model.ts';
import { DEFAULT_SETTINGS } from '../../src/store/settings.ts';
import { smallSettings } from '../helpers/small_settings.ts';
import { STAGES, type StagePayloads, type StepRunner, type StepSettings } from '../../src/bridge/protocol.ts';
import { checkBaseModel } from '../../src/worker/adapter.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { mismatchOf } from '../../src/worker/mismatch.ts';
import { noEdits, pageSettings } from '../../src/bridge/settings.ts';
import { trainerOfBatch } from '../../src/grpo/settings/effective.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';
import { expectSavedAdapter } from '../helpers/lora_saved.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';

const CASE = join(GOLDEN_ROOT, 'lora', 'qwen2-qv-r2-rslora');
const TOKENIZER_DIR = resolve(__dirname, '../../public/models/tiny-adder');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

function file(folder: string, name: string, bytes: Uint8Array<ArrayBuffer> | string): File {
  const f = new File([bytes], name);
  Object.defineProperty(f, 'webkitRelativePath', { value: `${folder}/${name}` });
  return f;
}

const folderFiles = (folder: string, dir: string): File[] => readdirSync(dir).map((f) => file(folder, f, readFileSync(join(dir, f))));

/**
 * The default model's byte-level BPE cut down to V ids (the golden bases have tiny vocabularies): its first
 * V - 3 tokens and the merges among them, then <|endoftext|>, <|im_start|>, <|im_end|>, with its chat template.
 */
function smallTokenizer(folder: string, V: number): File[] {
  const tok = read<{ model: { vocab: Record<string, number>; merges: [string, string][] }; added_tokens: { id: number; content: string }[] }>(join(TOKENIZER_DIR, 'tokenizer.json'));
  const cfg = read<Record<string, unknown> & { added_tokens_decoder: Record<string, { content: string }> }>(join(TOKENIZER_DIR, 'tokenizer_config.json'));
  const vocab = Object.fromEntries(Object.entries(tok.model.vocab).filter(([, id]) => id < V - 3));
  const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
  tok.model.vocab = vocab;
  tok.model.merges = tok.model.merges.filter(([a, b]) => a in vocab && b in vocab && a + b in vocab);
  tok.added_tokens = specials.map((content, i) => ({ ...tok.added_tokens.find((t) => t.content === content)!, id: V - 3 + i }));
  const decoder = Object.values(cfg.added_tokens_decoder);
  cfg.added_tokens_decoder = Object.fromEntries(specials.map((content, i) => [String(V - 3 + i), decoder.find((d) => d.content === content)!]));
  cfg.additional_special_tokens = specials.slice(1);
  return [file(folder, 'tokenizer.json', JSON.stringify(tok)), file(folder, 'tokenizer_config.json', JSON.stringify(cfg))];
}

/** A golden base (default: the case's) as a dropped folder with a tokenizer of its vocabulary. */
function baseFolder(dir = join(CASE, 'model')): File[] {
  const V = read<{ vocab_size: number }>(join(dir, 'config.json')).vocab_size;
  const files = readdirSync(dir).filter((f) => f === 'config.json' || f.endsWith('.safetensors'));
  return [...files.map((f) => file('model', f, readFileSync(join(dir, f)))), ...smallTokenizer('model', V)];
}

const batch = (): GrpoBatch => parseBatch(readFileSync(join(CASE, 'batch.json'), 'utf8'));
/** The page's settings for an update from the imported batch: its own config / run over its trainer's defaults, no edits. */
const settingsOf = (b: GrpoBatch): StepSettings => {
  const { prompts, sampling, rewards } = structuredClone(DEFAULT_SETTINGS);
  return { prompts, sampling, rewards, settings: pageSettings(trainerOfBatch(b), { kind: 'batch', batch: b, name: 'batch.json' }, noEdits()) };
};

/** Every stage of an update started from `b` (as an imported batch), or from the prompt set. */
async function runAll(runner: StepRunner, settings: StepSettings, b: GrpoBatch | null): Promise<Partial<StagePayloads>> {
  const out: Partial<StagePayloads> = {};
  for (const stage of STAGES) {
    const r = await runner.runStage(stage, settings, b ? { kind: 'batch', batch: b } : { kind: 'prompts' });
    (out as Record<string, unknown>)[stage] = r.data;
  }
  return out;
}

/** The policy's base weights as bytes (the runner's model, read back for the bit-identity check). */
async function baseWeights(runner: StepRunner): Promise<Map<string, Uint8Array>> {
  const policy = (runner as unknown as { policy: CausalLM }).policy;
  const gpu = await testGpu();
  const out = new Map<string, Uint8Array>();
  for (const [name, p] of policy.params) out.set(name, new Uint8Array(await gpu.read(p.buffer)));
  return out;
}

describe('StepRunner with a LoRA adapter', () => {
  it('golden qwen2-qv-r2-rslora: loaded adapter, one step, reference = base without adapter, saved PEFT folder', async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'model', files: baseFolder() }, () => {});
    const info = await runner.loadAdapter({ kind: 'local', name: 'adapter', files: folderFiles('adapter', join(CASE, 'adapter')) }, () => {});
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(CASE, 'golden.safetensors'))));
    const meta = JSON.parse(st.metadata.lora) as { r: number; modules: string[] };
    expect(info.adapter).toMatchObject({ r: meta.r, use_rslora: true, reference: 'base-without-adapter' });
    expect([...info.adapter!.modules].sort()).toEqual([...meta.modules].sort());
    expect(info.adapter!.scaling).toBeCloseTo(toF64(st, 'scaling')[0], 12);
    expect(info.memory_plan.options.adapter).toBe(meta.r); // the plan counts the adapter (as grpo-studio plan --adapter r)

    const b = batch();
    const r = await runAll(runner, settingsOf(b), b);
    const { padded } = r.assemble!;
    const mask = Array.from(padded.completion_mask);
    const tol = { rtol: 1e-4, atol: 1e-5, mask };
    expectClose(Array.from(r.policy_forward!.per_token_logps), Array.from(toF64(st, 'per_token_logps')), { ...tol, label: 'per_token_logps' });
    expect(r.reference_forward!.reference_label).toBe('base without adapter');
    expectClose(Array.from(r.reference_forward!.ref_per_token_logps!), Array.from(toF64(st, 'ref_per_token_logps')), { ...tol, label: 'ref_per_token_logps' });
    expectClose(Array.from(r.loss!.per_token_kl!), Array.from(toF64(st, 'per_token_kl')), { ...tol, label: 'per_token_kl' });
    expectClose([r.loss!.loss], [toF64(st, 'loss')[0]], { rtol: 1e-4, atol: 1e-6, label: 'loss' });
    expectClose([r.backward!.grad_norm], [toF64(st, 'grad_norm')[0]], { rtol: 1e-4, atol: 1e-6, label: 'grad_norm' });
    // Only the adapter trains: every parameter group of the grad and update norms is an adapter group.
    for (const groups of [r.backward!.group_grad_norms, r.step!.group_update_norms]) {
      expect(Object.keys(groups).length).toBeGreaterThan(0);
      for (const g of Object.keys(groups)) expect(g).toMatch(/^lora\./);
    }
    expectClose(Array.from(r.re_evaluate!.post_per_token_logps), Array.from(toF64(st, 'post_step.per_token_logps')), { rtol: 1e-3, atol: 0.002, mask, label: 'post_step.per_token_logps' });
    const saved = await runner.saveAdapter();
    expectSavedAdapter(CASE, saved as { 'adapter_model.safetensors': Uint8Array; 'adapter_config.json': Uint8Array }, 'runner');

    // The frozen copy of the loaded adapter as the reference: KL 0 before this update's step, whatever the stepped adapter.
    expect((await runner.adapterReference('frozen-adapter')).adapter!.reference).toBe('frozen-adapter');
    const again = await runAll(runner, { ...settingsOf(b), weights: 'loaded' }, b);
    expect(again.reference_forward!.reference_label).toBe('frozen copy of the loaded adapter');
    expect(Array.from(again.reference_forward!.ref_per_token_logps!)).toEqual(Array.from(again.policy_forward!.per_token_logps));
    // From the loaded weights, the update is the first one again.
    expectClose(Array.from(again.policy_forward!.per_token_logps), Array.from(toF64(st, 'per_token_logps')), { ...tol, label: 'per_token_logps (loaded again)' });
    runner.dispose();
  });

  it('a created adapter (B = 0) scores exactly as the base; its step changes only adapter tensors; removing it trains every weight again', async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'model', files: baseFolder() }, () => {});
    const b = batch();
    const settings = settingsOf(b);
    const base = await runAll(runner, settings, b);
    await runner.reset();
    const before = await baseWeights(runner);

    const info = await runner.loadAdapter({ kind: 'create', options: { r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', seed: 1 } }, () => {});
    expect(info.adapter).toMatchObject({ r: 4, lora_alpha: 8, scaling: 2, target_modules: 'all-linear', reference: 'base-without-adapter' });
    expect(info.adapter!.modules).toHaveLength(2 * 7); // q k v o gate up down, two layers
    // PEFT's init: lora_A from kaiming_uniform_(a = √5), U(±1/√in); lora_B = 0.
    const fresh = parseSafeTensors((await runner.saveAdapter())['adapter_model.safetensors']);
    for (const [k, t] of fresh.tensors) {
      const x = toF32(fresh, k);
      if (k.includes('lora_B')) expect(x.every((v) => v === 0), k).toBe(true);
      else {
        const bound = 1 / Math.sqrt(t.shape[1]);
        const max = x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        expect(max, k).toBeLessThanOrEqual(bound);
        expect(max, k).toBeGreaterThan(0.8 * bound); // spread over the range, not a constant
      }
    }
    const r = await runAll(runner, settings, b);
    expect(Array.from(r.policy_forward!.per_token_logps)).toEqual(Array.from(base.policy_forward!.per_token_logps));
    expect(Array.from(r.reference_forward!.ref_per_token_logps!)).toEqual(Array.from(base.policy_forward!.per_token_logps));
    expect(r.step!.update_norm).toBeGreaterThan(0);
    expect(r.re_evaluate!.post_per_token_logps).not.toEqual(r.policy_forward!.per_token_logps);
    const after = await baseWeights(runner);
    for (const [name, bytes] of before) expect(Buffer.compare(Buffer.from(after.get(name)!), Buffer.from(bytes)), name).toBe(0);

    // The saved folder: PEFT keys and F32 tensors of the chosen modules, the chosen config.
    const saved = await runner.saveAdapter();
    const cfg = JSON.parse(new TextDecoder().decode(saved['adapter_config.json'])) as Record<string, unknown>;
    expect(cfg).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', lora_dropout: 0 });
    const st = parseSafeTensors(saved['adapter_model.safetensors']);
    expect(st.tensors.size).toBe(2 * 2 * 7);
    for (const [k, t] of st.tensors) {
      expect(k).toMatch(/^base_model\.model\.model\.layers\.\d\.(self_attn|mlp)\.\w+_proj\.lora_[AB]\.weight$/);
      expect(t.dtype).toBe('F32');
    }

    // Removing the adapter: every weight trains again, the base as loaded.
    const removed = await runner.loadAdapter(null, () => {});
    expect(removed.adapter).toBeNull();
    const full = await runAll(runner, settings, b);
    expect(Array.from(full.policy_forward!.per_token_logps)).toEqual(Array.from(base.policy_forward!.per_token_logps));
    expect(Object.keys(full.backward!.group_grad_norms).some((g) => !g.startsWith('lora.'))).toBe(true);
    await expect(runner.saveAdapter()).rejects.toThrow(/no adapter/);
    runner.dispose();
  });

  it("sampling runs through the adapter: the sampler's log-probs are the adapted policy's, not the base's", async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    // A created adapter saved, its lora_B set to random values, and loaded back: an adapter that changes the model.
    await runner.loadAdapter({ kind: 'create', options: { r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', seed: 5 } }, () => {});
    const saved = await runner.saveAdapter();
    const st = parseSafeTensors(saved['adapter_model.safetensors']);
    const rng = new Rng(7);
    const tensors = Object.fromEntries([...st.tensors].map(([k, t]) => [k, { dtype: 'F32' as const, shape: t.shape, data: k.includes('lora_B') ? rng.f32(t.shape[0] * t.shape[1], 0.5) : toF32(st, k) }]));
    const files = [file('moved', 'adapter_config.json', saved['adapter_config.json'] as Uint8Array<ArrayBuffer>), file('moved', 'adapter_model.safetensors', writeSafeTensors(tensors) as Uint8Array<ArrayBuffer>)];
    await runner.loadAdapter({ kind: 'local', name: 'moved', files }, () => {});
    const settings = smallSettings(2, 4, false);
    const r = await runAll(runner, settings, null);
    const C = r.assemble!.padded.C;
    const at = (a: ArrayLike<number>, b: number, t: number) => a[b * C + t];
    let samplerVsPolicy = 0;
    let policyVsBase = 0;
    r.sample!.sampling_per_token_logps.forEach((row, b) =>
      row.forEach((x, t) => {
        samplerVsPolicy = Math.max(samplerVsPolicy, Math.abs(x - at(r.policy_forward!.per_token_logps, b, t)));
        policyVsBase = Math.max(policyVsBase, Math.abs(at(r.policy_forward!.per_token_logps, b, t) - at(r.reference_forward!.ref_per_token_logps!, b, t)));
      }),
    );
    expect(policyVsBase).toBeGreaterThan(1e-2); // the adapter matters
    expect(samplerVsPolicy).toBeLessThan(1e-4); // and the sampler used it
    runner.dispose();
  });

  it('a bf16 model: attaching an adapter reloads it with a frozen bf16 base and no frozen copy; removing it reloads it in f32', async () => {
    const runner = createStepRunner(await testGpu());
    const dir = join(GOLDEN_ROOT, 'models', 'tiny-llama-bf16');
    const full = await runner.load({ kind: 'local', name: 'model', files: baseFolder(dir) }, () => {});
    expect(full.memory_plan.options).toMatchObject({ dtype: 'bf16', adapter: null }); // every weight trains (as f32)
    expect(full.memory_plan.plan.bytes.reference_weights).toBe(full.memory_plan.plan.bytes.weights); // the frozen copy
    const progress: string[] = [];
    const info = await runner.loadAdapter({ kind: 'create', options: { r: 2, lora_alpha: 4, use_rslora: false, target_modules: ['q_proj', 'v_proj'], seed: 3 } }, (p) => progress.push(p.label));
    expect(progress.some((l) => l.startsWith('policy weights'))).toBe(true); // reloaded
    expect(info.memory_plan.options).toMatchObject({ dtype: 'bf16', adapter: 2 });
    expect(info.memory_plan.plan.bytes.weights).toBeLessThan(full.memory_plan.plan.bytes.weights); // bf16 stays bf16
    expect(info.memory_plan.plan.bytes.reference_weights).toBe(0); // the reference is the base itself, adapter off
    expect(info.memory_plan.plan.trainable_params).toBe(info.adapter!.num_parameters);
    const b = parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8'));
    const r = await runAll(runner, settingsOf(b), b);
    expect(r.reference_forward!.reference_label).toBe('base without adapter');
    expect(Array.from(r.reference_forward!.ref_per_token_logps!)).toEqual(Array.from(r.policy_forward!.per_token_logps)); // B = 0
    for (const g of Object.keys(r.backward!.group_grad_norms)) expect(g).toMatch(/^lora\.layers\.\d+\.attention$/);
    const removed = await runner.loadAdapter(null, () => {});
    expect(removed.memory_plan.options.adapter).toBeNull();
    expect(removed.memory_plan.plan.bytes.weights).toBe(full.memory_plan.plan.bytes.weights);
    expect(removed.memory_plan.plan.bytes.reference_weights).toBe(full.memory_plan.plan.bytes.reference_weights);
    runner.dispose();
  });

  it('an adapter that does not fit the model: one line naming the key, the model and update kept', async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'model', files: baseFolder() }, () => {});
    const other = join(GOLDEN_ROOT, 'lora', 'qwen3-all-linear-r3', 'adapter'); // another base's shapes (hidden 48, not 32)
    await expect(runner.loadAdapter({ kind: 'local', name: 'qwen3-adapter', files: folderFiles('qwen3-adapter', other) }, () => {})).rejects.toThrow(/^qwen3-adapter\/adapter_model\.safetensors: ("base_model\.model\.\S+" has shape|missing)/);
    const cfg = read<Record<string, unknown>>(join(CASE, 'adapter', 'adapter_config.json'));
    const renamed = [file('a', 'adapter_config.json', JSON.stringify({ ...cfg, base_model_name_or_path: 'Qwen/Qwen2.5-0.5B' })), file('a', 'adapter_model.safetensors', readFileSync(join(CASE, 'adapter', 'adapter_model.safetensors')))];
    // A dropped model folder may be renamed: its name is not checked against base_model_name_or_path.
    expect((await runner.loadAdapter({ kind: 'local', name: 'a', files: renamed }, () => {})).adapter!.base_model_name_or_path).toBe('Qwen/Qwen2.5-0.5B');
    await expect(runner.loadAdapter({ kind: 'create', options: { r: 0, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', seed: 1 } }, () => {})).rejects.toThrow(/"r" must be a positive integer/);
    await expect(runner.loadAdapter({ kind: 'create', options: { r: 2, lora_alpha: 8, use_rslora: false, target_modules: ['c_attn'], seed: 1 } }, () => {})).rejects.toThrow(/target_modules \["c_attn"\] matches no linear module/);
    // The failed loads kept the adapter that worked.
    expect((await runner.adapterReference('base-without-adapter')).adapter!.name).toBe('a');
    runner.dispose();
  });

  it("base_model_name_or_path must name the loaded model where both are names (Hub id, embedded model), not paths or renamable folders", () => {
    const hub = { kind: 'hub', id: 'Qwen/Qwen2.5-0.5B-Instruct' } as const;
    expect(() => checkBaseModel('Qwen/Qwen2.5-0.5B', hub, 'my-adapter')).toThrow('my-adapter/adapter_config.json: "base_model_name_or_path" is "Qwen/Qwen2.5-0.5B", but the loaded model is Qwen/Qwen2.5-0.5B-Instruct');
    expect(() => checkBaseModel('Qwen/Qwen2.5-0.5B-Instruct', hub, 'a')).not.toThrow();
    expect(() => checkBaseModel('/models/Qwen2.5-0.5B-Instruct/', hub, 'a')).not.toThrow(); // a path on the training machine
    expect(() => checkBaseModel('../model', hub, 'a')).not.toThrow();
    const embedded = { kind: 'embedded', name: 'tiny-adder', url: 'http://localhost/models/tiny-adder/' } as const;
    expect(() => checkBaseModel('someone/tiny-adder', embedded, 'a')).not.toThrow();
    expect(() => checkBaseModel('HuggingFaceTB/SmolLM2-135M', embedded, 'a')).toThrow(/is "HuggingFaceTB\/SmolLM2-135M", but the loaded model is tiny-adder$/);
    expect(() => checkBaseModel('HuggingFaceTB/SmolLM2-135M', { kind: 'local', name: 'renamed', files: [] }, 'a')).not.toThrow();
    expect(() => checkBaseModel(null, hub, 'a')).not.toThrow();
  });
  it("the mismatch explorer's recompute: the trainer side with the adapter and the base without it equal the golden log-probs; a sampler that is the base is diagnosed", async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'model', files: baseFolder() }, () => {});
    await runner.loadAdapter({ kind: 'local', name: 'adapter', files: folderFiles('adapter', join(CASE, 'adapter')) }, () => {});
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(CASE, 'golden.safetensors'))));
    const b = batch();
    const sides = await runner.scoreSides(b, settingsOf(b).settings);
    // Ragged like the completions; padded back to the golden (B, C) layout for the comparison under its mask.
    const C = Math.max(...b.completion_ids.map((r) => r.length));
    const padded = (rows: number[][]) => rows.flatMap((r) => [...r, ...Array<number>(C - r.length).fill(0)]);
    const mask = b.completion_mask.flatMap((r) => [...r, ...Array<number>(C - r.length).fill(0)]);
    expect(sides.trainer.map((r) => r.length)).toEqual(b.completion_ids.map((r) => r.length));
    expectClose(padded(sides.trainer), Array.from(toF64(st, 'per_token_logps')), { rtol: 1e-4, atol: 1e-5, mask, label: 'recomputed trainer side (adapter on)' });
    expectClose(padded(sides.base!), Array.from(toF64(st, 'ref_per_token_logps')), { rtol: 1e-4, atol: 1e-5, mask, label: 'recomputed base (adapter off)' });

    // The adapter never reached the sampler: its log-probs are the base's (the golden reference's, exactly).
    const ref = toF64(st, 'ref_per_token_logps');
    const pol = toF64(st, 'per_token_logps');
    const sampled: GrpoBatch = { ...b, sampling_per_token_logps: b.completion_ids.map((r, i) => r.map((_, t) => ref[i * C + t])) };
    const result = mismatchOf(sampled, { sides, tokenizer: null });
    expect(result.report!.trainer).toBe('recomputed');
    // docs/mismatch.md: a row is mismatched when its mean |d| over compared tokens exceeds the tolerance (0.05) with
    // at least 3 of them; every such row's sampler is the base here, so the rule names exactly those rows.
    const want = b.completion_ids.map((_, i) => i).filter((i) => {
      const d = b.completion_mask[i].flatMap((m, t) => (m ? [Math.abs(pol[i * C + t] - ref[i * C + t])] : []));
      return d.length >= 3 && d.reduce((x, y) => x + y, 0) / d.length > 0.05;
    });
    expect(want.length).toBeGreaterThan(0);
    const rule = result.report!.diagnoses.find((d) => d.id === 'adapter-missing-on-sampler');
    expect(rule?.rows.map((r) => r.sample)).toEqual(want);
    runner.dispose();
  });
});
