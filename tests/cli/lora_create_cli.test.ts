// `grpo-studio step --create-adapter SPEC` on the golden LoRA cases' bases (tests/golden/lora): the adapter the
// CLI creates is, tensor for tensor, the one the page's worker (AdapterSlot.open with a 'create' choice)
// makes from the same options; it has PEFT's init by PEFT's own definition, checked here without the
// implementation: lora_A from kaiming_uniform_(a=√5), i.e. U(±1/√in_features) with in_features read from
// the case's PEFT-saved adapter, lora_B = 0, so the first forward's log-probs are the base model's (the
// golden PyTorch reference); the step then trains only the adapter (and, B being 0, only lora_B moves).
// Bad SPECs are one line and exit 2.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { parseSafeTensors, toF32, type SafeTensors } from '../../src/io/safetensors.ts';
import { initLoraWeights } from '../../src/model/lora.ts';
import type { NewLoraOptions } from '../../src/model/lora_fields.ts';
import { parseConfig } from '../../src/model/config.ts';
import { CausalLM } from '../../src/model/model.ts';
import { openModelSource } from '../../src/model/source_node.ts';
import { AdapterSlot } from '../../src/worker/adapter.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';

const LORA = join(GOLDEN_ROOT, 'lora');
const tmpDir = () => mkdtempSync(join(tmpdir(), 'lora-create-'));
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
const st = (path: string): SafeTensors => parseSafeTensors(new Uint8Array(readFileSync(path)));

/** torch.nn.init.kaiming_uniform_(w, a=√5) on a (out, in) weight: bound = gain·√(3 / fan_in), gain = √(2 / (1 + a²)). */
const kaimingBound = (fanIn: number) => Math.sqrt(2 / (1 + 5)) * Math.sqrt(3 / fanIn);

/** The case's batch.json with the learning rate set to 0: the step leaves the adapter as created, so --save-adapter writes it. */
function frozenBatch(dir: string): string {
  const b = read<{ config: { optimizer: { lr: number } } }>(join(dir, 'batch.json'));
  b.config.optimizer.lr = 0;
  const path = join(tmpDir(), 'batch.json');
  writeFileSync(path, JSON.stringify(b));
  return path;
}

// Each case's targets are a subset of the modules its PEFT-saved adapter holds, so that file gives every
// adapted module's in_features and out_features (lora_A is (r, in), lora_B (out, r), as PEFT saves them).
const CASES: [string, string, NewLoraOptions][] = [
  ['llama-gqa-all-proj-r4', 'r=3,lora_alpha=6,seed=11', { r: 3, lora_alpha: 6, use_rslora: false, target_modules: 'all-linear', seed: 11 }],
  ['qwen2-qv-r2-rslora', 'use_rslora=true,target_modules=q_proj,v_proj,seed=5,r=2,lora_alpha=4', { r: 2, lora_alpha: 4, use_rslora: true, target_modules: ['q_proj', 'v_proj'], seed: 5 }],
  ['gpt2-cattn-cproj-r2', 'target_modules=c_attn,c_proj', { r: 8, lora_alpha: 16, use_rslora: false, target_modules: ['c_attn', 'c_proj'], seed: 0 }],
];

describe.each(CASES)('grpo-studio step --create-adapter on %s', (c, spec, options) => {
  const dir = join(LORA, c);
  const model = join(dir, 'model');
  const saved = tmpDir();
  const golden = st(join(dir, 'adapter', 'adapter_model.safetensors'));
  let cli: SafeTensors;
  beforeAll(async () => {
    const out = join(tmpDir(), 'R.json');
    expect(await main(['step', '--model', model, '--batch', frozenBatch(dir), '--create-adapter', spec, '--save-adapter', saved, '--out', out])).toBe(0);
    cli = st(join(saved, 'adapter_model.safetensors'));
  });

  it('is the adapter the page creates from the same options, tensor for tensor; adapter_config.json holds the options', async () => {
    const gpu = await testGpu();
    const policy = await CausalLM.from_pretrained(openModelSource(model), gpu, { storage: 'checkpoint' });
    const slot = await AdapterSlot.open(gpu, { kind: 'create', options }, policy, { kind: 'local', name: 'model', files: [] });
    try {
      const page = parseSafeTensors((await slot.save())['adapter_model.safetensors']);
      expect([...cli.tensors.keys()].sort()).toEqual([...page.tensors.keys()].sort());
      for (const k of cli.tensors.keys()) expect(toF32(cli, k), k).toEqual(toF32(page, k));
    } finally {
      slot.destroy();
      policy.destroy();
    }
    const cfg = read<Record<string, unknown>>(join(saved, 'adapter_config.json'));
    expect(cfg).toMatchObject({ peft_type: 'LORA', r: options.r, lora_alpha: options.lora_alpha, use_rslora: options.use_rslora, target_modules: options.target_modules, lora_dropout: 0, base_model_name_or_path: model });
    // The seed is A's: another seed, another A.
    const other = initLoraWeights(parseConfig(read(join(model, 'config.json'))), { ...options, seed: options.seed + 1 }, null);
    expect(Array.from(other.modules[0].A)).not.toEqual(Array.from(toF32(cli, `base_model.model.${other.modules[0].name}.lora_A.weight`)));
  });

  it("has PEFT's init: lora_A ~ U(±1/√in_features) per module (kaiming_uniform_, a = √5), lora_B = 0", () => {
    const aKeys = [...cli.tensors.keys()].filter((k) => k.endsWith('.lora_A.weight'));
    // all-linear on this llama, and each name list, select exactly the modules the PEFT-saved adapter holds.
    expect(aKeys.sort()).toEqual([...golden.tensors.keys()].filter((k) => k.endsWith('.lora_A.weight')).sort());
    const x: number[] = []; // every A entry over its module's bound
    for (const a of aKeys) {
      const b = a.replace('lora_A', 'lora_B');
      const [inF, outF] = [golden.tensors.get(a)!.shape[1], golden.tensors.get(b)!.shape[0]];
      expect(cli.tensors.get(a)!.shape, a).toEqual([options.r, inF]);
      expect(cli.tensors.get(b)!.shape, b).toEqual([outF, options.r]);
      expect(toF32(cli, b).every((v) => v === 0), `${b} is all zero`).toBe(true);
      const bound = kaimingBound(inF);
      const A = Array.from(toF32(cli, a), (v) => v / bound);
      const max = Math.max(...A.map(Math.abs));
      expect(max, `${a}: max |A| / bound`).toBeLessThanOrEqual(1);
      expect(max, `${a}: max |A| / bound (${A.length} draws fill the range)`).toBeGreaterThan(0.75);
      x.push(...A);
    }
    // U(-1, 1): mean 0, E[x²] = 1/3, E[x⁴] = 1/5 (a normal of that variance has 1/3); each within 5 standard errors.
    const n = x.length;
    const mean = (f: (v: number) => number) => x.reduce((s, v) => s + f(v), 0) / n;
    expect(Math.abs(mean((v) => v))).toBeLessThan(5 * Math.sqrt(1 / 3 / n));
    expect(Math.abs(mean((v) => v * v) - 1 / 3)).toBeLessThan(5 * Math.sqrt((1 / 5 - 1 / 9) / n));
    expect(Math.abs(mean((v) => v ** 4) - 1 / 5)).toBeLessThan(5 * Math.sqrt((1 / 9 - 1 / 25) / n));
  });
});

describe('grpo-studio step --create-adapter, one update', () => {
  const dir = join(LORA, 'qwen3-all-linear-r3');
  it("the first forward is the base model's (B = 0), the reference is the base without adapter, and only lora_B trains", async () => {
    const out = join(tmpDir(), 'R.json');
    const saved = tmpDir();
    const spec = 'r=4,lora_alpha=8,seed=3';
    expect(await main(['step', '--model', join(dir, 'model'), '--batch', join(dir, 'batch.json'), '--create-adapter', spec, '--save-adapter', saved, '--out', out])).toBe(0);
    const got = read<StepCliResult>(out);
    const base = read<Pick<StepCliResult, 'ref_per_token_logps'>>(join(dir, 'expected.json')).ref_per_token_logps!; // PyTorch, the base without adapter
    const mask = read<{ completion_mask: number[][] }>(join(dir, 'batch.json')).completion_mask.flat();
    expectClose(got.per_token_logps.flat(), base.flat(), { rtol: 1e-4, atol: 1e-5, mask, label: 'policy log-probs = base log-probs' });
    expect(got.reference).toBe('base without adapter');
    expect(got.per_token_logps).toEqual(got.ref_per_token_logps);
    expect(got.per_token_kl!.flat().every((k) => k === 0)).toBe(true);
    expect(got.grad_norm).toBeGreaterThan(0);
    for (const g of Object.keys(got.group_grad_norms)) expect(g).toMatch(/^lora\./);
    // B = 0 makes A's gradient 0, so AdamW (weight_decay 0) leaves A exactly as created and moves B alone.
    const stepped = st(join(saved, 'adapter_model.safetensors'));
    const init = initLoraWeights(parseConfig(read(join(dir, 'model', 'config.json'))), { r: 4, lora_alpha: 8, use_rslora: false, target_modules: 'all-linear', seed: 3 }, null);
    for (const m of init.modules) {
      expect(toF32(stepped, `base_model.model.${m.name}.lora_A.weight`), m.name).toEqual(m.A);
    }
    expect(init.modules.some((m) => toF32(stepped, `base_model.model.${m.name}.lora_B.weight`).some((v) => v !== 0))).toBe(true);
  });
});

describe("grpo-studio step with an adapter under TRL's sync_ref_model", () => {
  it("is refused in TRL's words (no reference model to sync under PEFT); the full model steps", async () => {
    const dir = join(LORA, 'qwen3-all-linear-r3');
    const b = read<{ config: Record<string, unknown> }>(join(dir, 'batch.json'));
    const path = join(tmpDir(), 'batch.json');
    writeFileSync(path, JSON.stringify({ ...b, config: { ...b.config, beta: 0.04, sync_ref_model: true } }));
    await expectRefusal(['step', '--model', join(dir, 'model'), '--batch', path, '--create-adapter', 'r=2'], /: config\.sync_ref_model: TRL refuses it with a PEFT adapter: "You passed `sync_ref_model=True` while using a PEFT model/);
    expect(await main(['step', '--model', join(dir, 'model'), '--batch', path, '--out', join(tmpDir(), 'R.json')])).toBe(0);
  });
});

describe('grpo-studio step --create-adapter, bad SPEC: one line, exit 2', () => {
  const dir = join(LORA, 'qwen2-qv-r2-rslora');
  const base = ['step', '--model', join(dir, 'model'), '--batch', join(dir, 'batch.json'), '--out', join(tmpDir(), 'R.json')];
  it.each([
    ['r = 0', 'r=0', /--create-adapter: "r" must be a positive integer, got 0$/],
    ['a fractional r', 'r=2.5', /"r" must be a positive integer, got 2\.5/],
    ['an unknown key', 'rank=4', /--create-adapter: unknown key "rank" \(keys: r, lora_alpha, use_rslora, target_modules, seed\)/],
    ['a key given twice', 'r=4,r=8', /"r" is given twice/],
    ['a bare value', 'r=4,8', /"8" is not key=value/],
    ['a non-boolean use_rslora', 'use_rslora=yes', /"use_rslora" must be true or false, got "yes"/],
    ['a non-number lora_alpha', 'lora_alpha=abc', /"lora_alpha" must be a finite number, got "abc"/],
    ['a negative seed', 'seed=-1', /"seed" must be an integer from 0 to 4294967295, got -1/],
    ['an empty target_modules', 'target_modules=', /"target_modules" must be "all-linear" or a non-empty list of module names, got \[\]/],
    ['an unknown target module', 'target_modules=nope_proj', /--create-adapter: target_modules \["nope_proj"\] matches no linear module of this qwen2 model \(its linear modules end in q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj\)/],
    ['a misspelt one beside a known one', 'target_modules=q_proj,vproj', /--create-adapter: target_modules entry "vproj" matches no linear module of this qwen2 model/],
  ])('refuses %s', async (_what, spec, msg) => {
    await expectRefusal([...base, '--create-adapter', spec], msg);
  });

  it('refuses --adapter with --create-adapter, and --save-adapter with neither', async () => {
    await expectRefusal([...base, '--adapter', join(dir, 'adapter'), '--create-adapter', 'r=2'], /--adapter and --create-adapter both give the adapter: give one/);
    await expectRefusal([...base, '--save-adapter', tmpDir()], /--save-adapter needs --adapter DIR or --create-adapter SPEC/);
  });
});
