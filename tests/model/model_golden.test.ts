// The GPU model against the golden float64 PyTorch references (tests/golden/models, README there):
// logits with left padding and generation-style position ids (and GPT-2 with arange positions), the
// TRL-aligned logits_to_keep path, per-token log-probs of policy and reference, and the gradient of the
// golden GRPO loss with respect to every parameter (dlogits from the loss kernels), plus grad_norm — with the
// kernels each adapter class gets (asAdapterClass: the GPU's tiled GEMM and workgroup-per-row attention, SwiftShader's
// direct GEMM and capped workgroups, lavapipe's subgroup GEMM), all on the test device.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AdapterClass, Gpu } from '../../src/gpu/context.ts';
import { grpo_loss, readGrpoLoss, type GrpoLossConfig } from '../../src/grpo/loss.ts';
import { parseSafeTensors, toF32, toF64, toI32, type SafeTensors } from '../../src/io/safetensors.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectClose } from '../helpers/close.ts';
import { asAdapterClass, testGpu as deviceGpu } from '../helpers/gpu.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';


interface Golden {
  st: SafeTensors;
  B: number;
  L: number;
  P: number;
  C: number;
  V: number;
  input_ids: Int32Array; // (B, L)
  attention_mask: Int32Array; // (B, L)
  position_ids: Int32Array; // (B, L)
  completion_ids: Int32Array; // (B, C) = input_ids[:, P:]
  completion_mask: Int32Array; // (B, C)
}

function golden(m: string): Golden {
  const st = parseSafeTensors(new Uint8Array(readFileSync(join(GOLDEN, m, 'golden.safetensors'))));
  const [B, L] = st.tensors.get('input_ids')!.shape;
  const P = toI32(st, 'prompt_length')[0];
  const V = st.tensors.get('logits')!.shape[2];
  const input_ids = toI32(st, 'input_ids');
  return {
    st, B, L, P, C: L - P, V,
    input_ids,
    completion_ids: input_ids.filter((_, i) => i % L >= P),
    attention_mask: toI32(st, 'attention_mask'),
    position_ids: toI32(st, 'position_ids'),
    completion_mask: toI32(st, 'completion_mask'),
  };
}

async function load(gpu: Gpu, dir: string): Promise<CausalLM> {
  return CausalLM.from_pretrained(new FolderSource(dir), gpu);
}

/** Model m's golden data with its policy and reference loaded on the test GPU. */
async function withModels(gpu: Gpu, m: string): Promise<{ gpu: Gpu; g: Golden; policy: CausalLM; ref: CausalLM }> {
  return { gpu, g: golden(m), policy: await load(gpu, join(GOLDEN, m)), ref: await load(gpu, join(GOLDEN, m, 'ref')) };
}

/** Every (row, v) element of rows whose attention_mask is 1 (pad-query logits are implementation-defined). */
function rowMask(mask: ArrayLike<number>, V: number): Uint8Array {
  const out = new Uint8Array(mask.length * V);
  for (let r = 0; r < mask.length; r++) if (mask[r]) out.fill(1, r * V, (r + 1) * V);
  return out;
}

async function logits(gpu: Gpu, model: CausalLM, g: Golden, position_ids: Int32Array, keep?: number): Promise<Float32Array> {
  const rec = gpu.recorder('forward');
  const r = model.forward(rec, { B: g.B, T: g.L, input_ids: g.input_ids, attention_mask: g.attention_mask, position_ids }, { logits_to_keep: keep });
  await rec.submit();
  return gpu.readF32(r.logits, r.rows * r.V);
}

const worst: Record<string, number> = {};
function note(label: string, r: { worst: number }): void {
  worst[label] = Math.max(worst[label] ?? 0, r.worst);
}

const CLASSES: AdapterClass[] = ['cpu', 'swiftshader', 'gpu'];
describe.each(GOLDEN_MODELS.flatMap((m) => CLASSES.map((c) => [m, c] as const)))('%s, %s kernels', (m, cls) => {
  const testGpu = async () => asAdapterClass(await deviceGpu(), cls);
  it('logits match where attention_mask = 1 (left padding, generation position ids)', async () => {
    const gpu = await testGpu();
    const g = golden(m);
    const model = await load(gpu, join(GOLDEN, m));
    const got = await logits(gpu, model, g, g.position_ids);
    // README: logits rtol 1e-4, atol 1e-4 (a float32 replay uses 0.029 of it).
    note('logits', expectClose(got, toF32(g.st, 'logits'), { rtol: 1e-4, atol: 1e-4, mask: rowMask(g.attention_mask, g.V), label: `${m} logits` }));
    if (m === 'tiny-gpt2') {
      const arange = await logits(gpu, model, g, toI32(g.st, 'arange_position_ids'));
      note('logits', expectClose(arange, toF32(g.st, 'logits_arange'), { rtol: 1e-4, atol: 1e-4, mask: rowMask(g.attention_mask, g.V), label: `${m} logits_arange` }));
    }
    // logits_to_keep = C: row b·C + t is the full forward's row (b, P − 1 + t).
    const kept = await logits(gpu, model, g, g.position_ids, g.C);
    const full = toF32(g.st, 'logits');
    const want = new Float32Array(g.B * g.C * g.V);
    const keptMask = new Int32Array(g.B * g.C);
    for (let b = 0; b < g.B; b++) {
      for (let t = 0; t < g.C; t++) {
        const src = b * g.L + g.P - 1 + t;
        want.set(full.subarray(src * g.V, (src + 1) * g.V), (b * g.C + t) * g.V);
        keptMask[b * g.C + t] = g.attention_mask[src];
      }
    }
    expectClose(kept, want, { rtol: 1e-4, atol: 1e-4, mask: rowMask(keptMask, g.V), label: `${m} kept logits` });
    model.destroy();
  });

  it('per_token_logps, ref_per_token_logps and entropy match where completion_mask = 1', async () => {
    const { gpu, g, policy, ref } = await withModels(await testGpu(), m);
    const rec = gpu.recorder('score');
    const ps = score_completions(rec, policy, g);
    const rs = score_completions(rec, ref, g);
    await rec.submit();
    const n = g.B * g.C;
    // README: per-token log-probs rtol 1e-4, atol 1e-5 (completion_mask = 1).
    const tol = { rtol: 1e-4, atol: 1e-5, mask: g.completion_mask };
    note('per_token_logps', expectClose(await gpu.readF32(ps.per_token_logps, n), toF64(g.st, 'per_token_logps'), { ...tol, label: `${m} per_token_logps` }));
    note('per_token_logps', expectClose(await gpu.readF32(rs.per_token_logps, n), toF64(g.st, 'ref_per_token_logps'), { ...tol, label: `${m} ref_per_token_logps` }));
    note('per_token_entropy', expectClose(await gpu.readF32(ps.per_token_entropy, n), toF64(g.st, 'per_token_entropy'), { ...tol, label: `${m} per_token_entropy` }));
    ps.destroy();
    rs.destroy();
    policy.destroy();
    ref.destroy();
  });

  it('gradients of the golden GRPO loss match grad.<param>, and loss / grad_norm match', async () => {
    const { gpu, g, policy, ref } = await withModels(await testGpu(), m);
    const rec0 = gpu.recorder('ref');
    const rs = score_completions(rec0, ref, g);
    await rec0.submit();

    const rec = gpu.recorder('step');
    const f = policy.forward(rec, { B: g.B, T: g.L, input_ids: g.input_ids, attention_mask: g.attention_mask, position_ids: g.position_ids }, { logits_to_keep: g.C, save: true });
    // The golden README's loss: TRL grpo, token-level ratio, β = 0.04 with k3, ε = 0.2 / 0.28, no δ.
    const config: GrpoLossConfig = { loss_type: 'grpo', beta: 0.04, epsilon_low: 0.2, epsilon_high: 0.28, delta: null, temperature: 1, max_completion_length: g.C, kl_estimator: 'k3', importance_sampling_level: 'token' };
    const loss = await grpo_loss(
      gpu,
      {
        B: g.B, T: g.C, V: f.V, logits: f.logits,
        completion_ids: rs.completion_ids,
        completion_mask: rs.completion_mask,
        advantages: gpu.upload('advantages', toF32(g.st, 'advantages')),
        old_per_token_logps: gpu.upload('old', toF32(g.st, 'old_per_token_logps')),
        ref_per_token_logps: rs.per_token_logps,
      },
      config,
      { rec },
    );
    policy.backward(rec, loss.dlogits!);
    await rec.submit();
    const lr = await readGrpoLoss(gpu, loss);
    // README: loss and grad_norm rtol 1e-4, atol 1e-6.
    note('loss', expectClose([lr.loss], toF64(g.st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: `${m} loss` }));

    let sumsq = 0;
    for (const name of policy.params.keys()) {
      const got = await policy.readGrad(name);
      const want = toF64(g.st, `grad.${name}`);
      for (const x of got) sumsq += x * x;
      const gmax = want.reduce((a, x) => Math.max(a, Math.abs(x)), 0);
      // README: grad.<param> rtol 1e-4, atol 1e-5·gmax.
      note('grad', expectClose(got, want, { rtol: 1e-4, atol: 1e-5 * gmax, label: `${m} grad.${name}` }));
    }
    note('grad_norm', expectClose([Math.sqrt(sumsq)], toF64(g.st, 'grad_norm'), { rtol: 1e-4, atol: 1e-6, label: `${m} grad_norm` }));
    loss.destroy();
    rs.destroy();
    policy.destroy();
    ref.destroy();
  });
});

describe('summary', () => {
  it('reports the worst fraction of each tolerance', () => {
    console.log('worst fraction of tolerance:', JSON.stringify(worst));
    expect(Object.keys(worst).length).toBeGreaterThan(0);
  });
});
