// Loading Hugging Face checkpoints: config parsing, every ModelSource (folder, dropped files, HTTP Hub
// layout on a local server), sharded / F16 / BF16 checkpoints, and the ModelLoadError cases.
import { createServer } from 'node:http';
import { readFileSync, existsSync, writeFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { parseSafeTensors, toF32 } from '../../src/io/safetensors.ts';
import { countParams, ModelLoadError, paramSpecs, parseConfig } from '../../src/model/config.ts';
import { HubSource } from '../../src/model/hub.ts';
import { loadCheckpoint, type LoadProgress } from '../../src/model/loader.ts';
import { FileSource, type ModelSource } from '../../src/model/source.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { TINY_CONFIGS, tinyModel, writeModelFolder, tempDir, randomWeights } from '../fixtures/models.ts';
import { GOLDEN, GOLDEN_MODELS } from '../helpers/golden.ts';


async function loadAll(source: ModelSource, onProgress?: (p: LoadProgress) => void) {
  const tensors = new Map<string, Float32Array>();
  const info = await loadCheckpoint(source, (spec, data) => void tensors.set(spec.name, data.slice()), { onProgress });
  return { info, tensors };
}

/** The stored tensors of a golden model.safetensors, read independently of the loader. */
function storedTensors(dir: string): Map<string, Float32Array> {
  const st = parseSafeTensors(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))));
  return new Map([...st.tensors.keys()].map((n) => [n, toF32(st, n)]));
}

describe('config.json', () => {
  it('parses every golden config as the README describes it', () => {
    const want: Record<string, [string, number, number, number, number, boolean]> = {
      // family, hidden, heads, kv heads, head_dim, tied
      'tiny-gpt2': ['gpt2', 32, 4, 4, 8, true],
      'tiny-llama': ['llama', 32, 4, 2, 8, false],
      'tiny-qwen2': ['qwen2', 32, 4, 2, 8, true],
      'tiny-qwen3': ['qwen3', 48, 3, 1, 16, false],
      'tiny-llama-bf16': ['llama', 32, 4, 2, 8, false],
    };
    for (const m of GOLDEN_MODELS) {
      const cfg = parseConfig(JSON.parse(readFileSync(join(GOLDEN, m, 'config.json'), 'utf8')));
      const [family, C, Hq, Hkv, D, tied] = want[m];
      expect([cfg.family, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.tie_word_embeddings], m).toEqual([family, C, Hq, Hkv, D, tied]);
      expect(cfg.qkv_bias, m).toBe(family === 'qwen2' || family === 'gpt2');
      expect(cfg.qk_norm, m).toBe(family === 'qwen3');
    }
  });

  it('rejects unsupported architectures and options with ModelLoadError', () => {
    const llama = TINY_CONFIGS.llama;
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...llama, architectures: ['MistralForCausalLM'] }, /unsupported architecture "MistralForCausalLM"/],
      [{ ...llama, architectures: undefined }, /architectures/],
      [{ ...llama, rope_scaling: { rope_type: 'llama3', factor: 8 } }, /rope_scaling/],
      [{ ...llama, hidden_act: 'gelu' }, /hidden_act/],
      [{ ...llama, num_key_value_heads: 3 }, /num_key_value_heads/],
      [{ ...llama, hidden_size: 'big' }, /"hidden_size" must be a number/],
      [{ ...TINY_CONFIGS.gpt2, activation_function: 'relu' }, /activation_function/],
      [{ ...TINY_CONFIGS.gpt2, resid_pdrop: 1.5 }, /"resid_pdrop" must be a probability in \[0, 1\], got 1\.5/],
      [{ ...llama, attention_dropout: '0.1' }, /"attention_dropout" must be a number/],
    ];
    for (const [cfg, re] of bad) {
      expect(() => parseConfig(cfg)).toThrow(ModelLoadError);
      expect(() => parseConfig(cfg)).toThrow(re);
    }
  });

  it("reads the dropout each family's modeling code applies, with the transformers config class's defaults", () => {
    // The hub's gpt2 config.json: attn_pdrop / embd_pdrop / resid_pdrop 0.1 (summary_first_dropout is the
    // sequence-summary head's, not the causal LM's).
    const hubGpt2 = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures/configs/gpt2.json'), 'utf8'));
    expect(parseConfig(hubGpt2).dropout).toEqual({ attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 });
    // Keys left out take GPT2Config's defaults (0.1 each, transformers configuration_gpt2.py); zeros are no dropout.
    const { attn_pdrop: _a, embd_pdrop: _e, resid_pdrop: _r, ...bare } = TINY_CONFIGS.gpt2;
    expect(parseConfig(bare).dropout).toEqual({ attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 });
    expect(parseConfig({ ...bare, attn_pdrop: 0, embd_pdrop: 0 }).dropout).toEqual({ resid_pdrop: 0.1 });
    expect(parseConfig(TINY_CONFIGS.gpt2).dropout).toEqual({});
    // Llama / Qwen: attention_dropout, 0.0 by default and in every published checkpoint the fixtures hold.
    for (const name of ['SmolLM2-360M', 'Qwen2.5-0.5B', 'Qwen3-0.6B']) {
      expect(parseConfig(JSON.parse(readFileSync(join(__dirname, '..', `fixtures/configs/${name}.json`), 'utf8'))).dropout, name).toEqual({});
    }
    expect(parseConfig(TINY_CONFIGS.llama).dropout).toEqual({});
    expect(parseConfig({ ...TINY_CONFIGS.qwen3, attention_dropout: 0.25 }).dropout).toEqual({ attention_dropout: 0.25 });
  });

  it('counts the parameters of real checkpoints (SmolLM2-135M, Qwen2-0.5B, GPT-2)', () => {
    // Published sizes: SmolLM2-135M 134,515,008; Qwen2-0.5B 494,032,768; GPT-2 124,439,808.
    const smol = { architectures: ['LlamaForCausalLM'], vocab_size: 49152, hidden_size: 576, num_attention_heads: 9, num_key_value_heads: 3, num_hidden_layers: 30, intermediate_size: 1536, tie_word_embeddings: true };
    const qwen = { architectures: ['Qwen2ForCausalLM'], vocab_size: 151936, hidden_size: 896, num_attention_heads: 14, num_key_value_heads: 2, num_hidden_layers: 24, intermediate_size: 4864, tie_word_embeddings: true };
    const gpt2 = { architectures: ['GPT2LMHeadModel'], vocab_size: 50257, n_embd: 768, n_head: 12, n_layer: 12, n_positions: 1024 };
    expect(countParams(parseConfig(smol))).toBe(134_515_008);
    expect(countParams(parseConfig(qwen))).toBe(494_032_768);
    expect(countParams(parseConfig(gpt2))).toBe(124_439_808);
  });
});

describe('loadCheckpoint', () => {
  it('loads every golden model folder with every parameter at its stored value', async () => {
    for (const m of GOLDEN_MODELS) {
      const { info, tensors } = await loadAll(new FolderSource(join(GOLDEN, m)));
      const stored = storedTensors(join(GOLDEN, m));
      expect([...tensors.keys()].sort(), m).toEqual(paramSpecs(info.config).map((p) => p.name).sort());
      for (const [name, data] of tensors) expect(data, `${m} ${name}`).toEqual(stored.get(name));
      expect(info.dtypes, m).toEqual([m.endsWith('bf16') ? 'BF16' : 'F32']);
      expect(info.unused, m).toEqual([]);
    }
  });

  it('widens BF16 exactly: tiny-llama-bf16 is tiny-llama rounded to bfloat16', async () => {
    const f32 = (await loadAll(new FolderSource(join(GOLDEN, 'tiny-llama')))).tensors;
    const bf16 = (await loadAll(new FolderSource(join(GOLDEN, 'tiny-llama-bf16')))).tensors;
    for (const [name, x] of f32) {
      const y = bf16.get(name)!;
      // Round to nearest with an 8-bit significand: |x − bf16(x)| ≤ half an ulp ≤ 2⁻⁸·|x|; bf16 values have 16 zero low bits.
      for (let i = 0; i < x.length; i++) expect(Math.abs(x[i] - y[i]), name).toBeLessThanOrEqual(2 ** -8 * Math.abs(x[i]));
      expect(new Uint32Array(y.buffer, y.byteOffset, y.length).every((b) => (b & 0xffff) === 0), name).toBe(true);
    }
  });

  it('reads sharded F16 checkpoints through model.safetensors.index.json, reporting progress', async () => {
    const { dir, weights } = tinyModel('qwen3', 3, { dtype: 'F16', shards: 3 });
    expect(readdirSync(dir).filter((f) => f.endsWith('.safetensors'))).toHaveLength(3);
    const events: LoadProgress[] = [];
    const { info, tensors } = await loadAll(new FolderSource(dir), (p) => events.push(p));
    expect(info.files).toHaveLength(3);
    expect(info.dtypes).toEqual(['F16']);
    for (const [name, w] of Object.entries(weights)) {
      const got = tensors.get(name)!;
      // Half precision keeps 11 significant bits (relative error ≤ 2⁻¹¹); subnormal halves are spaced 2⁻²⁴.
      for (let i = 0; i < w.length; i++) expect(Math.abs(got[i] - w[i]), name).toBeLessThanOrEqual(2 ** -11 * Math.abs(w[i]) + 2 ** -25);
    }
    const downloads = events.filter((e) => e.phase === 'download');
    expect(new Set(downloads.map((e) => e.file)).size).toBe(3);
    expect(downloads.every((e) => e.loaded <= e.total && e.files === 3)).toBe(true);
    expect(events.at(-1)).toMatchObject({ phase: 'done', loaded: tensors.size, total: tensors.size });
  });

  it('accepts original GPT-2 names (no "transformer." prefix) and ignores attn.bias buffers and a tied lm_head', async () => {
    const hf = TINY_CONFIGS.gpt2;
    const weights = randomWeights(parseConfig(hf), 5);
    const dir = writeModelFolder(join(tempDir('gpt2-orig'), 'm'), hf, weights, {
      rename: (n) => n.replace(/^transformer\./, ''),
      extra: { 'h.0.attn.bias': new Float32Array(4), 'lm_head.weight': new Float32Array(3), 'score.weight': new Float32Array(2) },
    });
    const { info, tensors } = await loadAll(new FolderSource(dir));
    expect(tensors.get('transformer.h.1.mlp.c_fc.weight')).toEqual(weights['transformer.h.1.mlp.c_fc.weight']);
    expect(info.unused).toEqual(['score.weight']);
  });

  it('fails with ModelLoadError on a missing tensor, a wrong shape, an integer dtype, or no weights file', async () => {
    const hf = TINY_CONFIGS.llama;
    const cfg = parseConfig(hf);
    const w = randomWeights(cfg, 9);
    const { ['model.layers.1.mlp.up_proj.weight']: _dropped, ...missing } = w;
    const dirMissing = writeModelFolder(join(tempDir('missing'), 'm'), hf, missing);
    await expect(loadAll(new FolderSource(dirMissing))).rejects.toThrow(/missing tensor "model.layers.1.mlp.up_proj.weight"/);

    // Same element count, wrong shape: the config says [I, C] = [21, 16].
    const dirShape = writeModelFolder(join(tempDir('shape'), 'm'), { ...hf, intermediate_size: 21 }, w);
    writeFileSync(join(dirShape, 'config.json'), JSON.stringify({ ...hf, intermediate_size: 22 }));
    await expect(loadAll(new FolderSource(dirShape))).rejects.toThrow(ModelLoadError);
    await expect(loadAll(new FolderSource(dirShape))).rejects.toThrow(/"model.layers.0.mlp.\w+_proj.weight" has shape \[\d+,\d+\], config.json implies \[\d+,\d+\]/);

    const dirNone = tempDir('none');
    writeFileSync(join(dirNone, 'config.json'), JSON.stringify(hf));
    writeFileSync(join(dirNone, 'pytorch_model.bin'), 'x');
    await expect(loadAll(new FolderSource(dirNone))).rejects.toThrow(/no model.safetensors.*pytorch_model.bin/);

    const dirArch = writeModelFolder(join(tempDir('arch'), 'm'), hf, w);
    writeFileSync(join(dirArch, 'config.json'), JSON.stringify({ ...hf, architectures: ['PhiForCausalLM'] }));
    await expect(loadAll(new FolderSource(dirArch))).rejects.toThrow(ModelLoadError);
  });
});

describe('model sources', () => {
  it('FileSource (dropped files) loads what FolderSource loads', async () => {
    const dir = join(GOLDEN, 'tiny-qwen2');
    const files = ['config.json', 'model.safetensors'].map((f) => new File([readFileSync(join(dir, f))], f));
    const a = await loadAll(FileSource.fromFiles(files));
    const b = await loadAll(new FolderSource(dir));
    expect([...a.tensors.entries()]).toEqual([...b.tensors.entries()]);
    await expect(FileSource.fromFiles(files).readBytes('nope.json')).rejects.toThrow(ModelLoadError);
  });

  it('HubSource reads {endpoint}/{id}/resolve/{revision}/{file} from a local server', async () => {
    // A server that mimics the Hub's resolve layout over the golden folder (and its ref/ subfolder).
    const requests: string[] = [];
    const server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      const m = /^\/golden\/([\w-]+)\/resolve\/main\/(.+)$/.exec(req.url ?? '');
      const path = m ? join(GOLDEN, m[1], decodeURIComponent(m[2])) : '';
      if (!m || !existsSync(path)) {
        res.writeHead(404, { 'x-error-code': 'EntryNotFound' }).end('Entry not found');
        return;
      }
      const body = readFileSync(path);
      res.writeHead(200, { 'content-length': body.byteLength });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const hub = new HubSource('golden/tiny-llama', { endpoint });
      const progress: LoadProgress[] = [];
      const a = await loadAll(hub, (p) => progress.push(p));
      const b = await loadAll(new FolderSource(join(GOLDEN, 'tiny-llama')));
      expect([...a.tensors.entries()]).toEqual([...b.tensors.entries()]);
      expect(requests).toContain('GET /golden/tiny-llama/resolve/main/config.json');
      expect(requests).toContain('GET /golden/tiny-llama/resolve/main/model.safetensors');
      const size = readFileSync(join(GOLDEN, 'tiny-llama/model.safetensors')).byteLength;
      expect(progress.filter((p) => p.phase === 'download').at(-1)).toMatchObject({ loaded: size, total: size });
      // The reference policy in ref/ is a file path with a slash.
      expect(await new HubSource('golden/tiny-llama', { endpoint }).exists('ref/config.json')).toBe(true);
      await expect(loadAll(new HubSource('golden/nope', { endpoint }))).rejects.toThrow(/config.json: HTTP 404/);
    } finally {
      server.close();
    }
  });
});
